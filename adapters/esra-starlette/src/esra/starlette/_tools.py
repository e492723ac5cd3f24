"""The MCP tools each caller sees, and what a call to one does.

A caller's tools are computed per request from its tenant's current configuration:
``esra_{slug}`` for every exposure that ``admitted_exposure`` admits for this caller (published,
the caller's client application in its audience, its access policy satisfied) and
``esra_{slug}_fetch`` where that exposure also enables fetch. Nothing else is visible — no
other tenant's tools, no tool the policy refuses — and calling a tool that is not in the
caller's list looks exactly like calling one that does not exist.

A call runs authenticate (the SDK's bearer middleware, before this module) → authorize (the
tool is in the caller's list) → audit (one ``esra.invoke`` record, denials included) → the
core's pipeline. Every failure reaches the client as a classified tool error; a failed
``tools/list`` (which has no tool error to give) as a JSON-RPC ``INTERNAL_ERROR`` reading
``ESRA_INTERNAL: …`` with the core's fixed text — the detail is logged, never returned. A
``tools/call`` the SDK refuses as malformed (``arguments`` not an object, no tool name) keeps
the SDK's ``INVALID_PARAMS`` answer, the same for every name, and is audited all the same.

A search tool's input schema lists the fields this caller may filter on through that exposure
(``esra.core.hosting.listed_filter_fields``), so two callers of one tool may
see different schemas; every other part of the schemas is fixed and hand-written.

The low-level ``mcp`` server is used rather than ``MCPServer``: tools here are data from
configuration, different for every caller, with per-caller schemas, so a registry of
decorated functions (and its global input-schema lookup) would only be worked around.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import attrs
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolAnnotations,
)
from opentelemetry import trace
from pydantic import ValidationError

from esra.core import DocumentFetcher, InvocationContext, RetrievalRequest, Retriever, SystemClock
from esra.core.audit import AuditRecord, AuditUnavailableError, deferred_audit_waits
from esra.core.codes import AuditEvent
from esra.core.config import ConfigSnapshot, Exposure
from esra.core.exceptions import EsraError, ExposureNotFoundError, InvalidRequestError
from esra.core.hosting import (
    CallerFilterField,
    ClientSnapshotCache,
    admitted_exposure,
    listed_filter_fields,
)
from esra.core.ports import AuditSink, Clock, ConfigRepository
from esra.core.telemetry import TENANT_ID, invocation_attributes, meter
from esra.starlette import __version__
from esra.starlette._auth import AuthenticatedCaller, current_caller
from esra.starlette._output import (
    error_result,
    fetch_output,
    search_output,
    success_result,
)
from esra.starlette._schemas import (
    FETCH_INPUT_SCHEMA,
    FETCH_OUTPUT_SCHEMA,
    SEARCH_OUTPUT_SCHEMA,
    FetchArguments,
    SearchArguments,
    parse_fetch_arguments,
    parse_search_arguments,
    search_input_schema,
)

__all__ = ["EsraTools", "PublishedTool", "TenantServices", "ToolKind"]

FETCH_SUFFIX = "_fetch"
# The MCP tool-name grammar; a requested name outside it is audited as "(invalid)".
_TOOL_NAME = re.compile(r"[A-Za-z0-9_./-]{1,64}")
_READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

_log = logging.getLogger(__name__)
# The MCP conventions' server duration per tool call (the SDK traces calls, it does not time).
_CALL_DURATION = meter().create_histogram(
    "mcp.server.operation.duration", unit="s", description="Duration of one MCP tool call."
)


@attrs.frozen
class TenantServices:
    """One tenant's pipeline entry points, each bound to that tenant."""

    retriever: Retriever
    fetcher: DocumentFetcher | None = None


class ToolKind(StrEnum):
    """The two tools an exposure can publish."""

    SEARCH = "search"
    FETCH = "fetch"


@attrs.frozen
class PublishedTool:
    """A tool as one caller sees it."""

    name: str
    kind: ToolKind
    exposure: Exposure
    capability_name: str
    with_fetch: bool = False

    def definition(self, filter_fields: Sequence[CallerFilterField] = ()) -> Tool:
        """The MCP tool definition: name, description and the kind's schemas.

        ``filter_fields`` are the fields this caller may filter a search tool on; the input
        schema names them and nothing else.
        """
        search_name = self.exposure.tool_name
        if self.kind is ToolKind.SEARCH:
            description = (
                f"{self.capability_name}: ask in natural language. Returns ranked results from "
                "the sources you may use, each with its title, matching fragments, allowlisted "
                "fields and source."
            )
            if self.with_fetch:
                description += (
                    f" Pass a result's documentRef to {search_name}{FETCH_SUFFIX} to read more."
                )
            return Tool(
                name=self.name,
                title=self.capability_name,
                description=description,
                input_schema=search_input_schema(filter_fields),
                output_schema=SEARCH_OUTPUT_SCHEMA,
                annotations=_READ_ONLY,
            )
        return Tool(
            name=self.name,
            title=f"{self.capability_name}: read a result",
            description=(
                f"Read more of one result of {search_name}: pass its documentRef, and page "
                "with offset (a previous page's nextOffset) and maxChars."
            ),
            input_schema=FETCH_INPUT_SCHEMA,
            output_schema=FETCH_OUTPUT_SCHEMA,
            annotations=_READ_ONLY,
        )


class EsraTools:
    """Lists and runs the ESRA tools of whoever is calling.

    Args:
        config: where tenant snapshots come from (the one the tenants' services read).
        tenants: each served tenant's services; a tenant absent here has no tools.
        audit: where ``esra.invoke`` records go.
        clock: time source for audit records (defaults to the system clock).
    """

    def __init__(
        self,
        *,
        config: ConfigRepository,
        tenants: Mapping[str, TenantServices],
        audit: AuditSink,
        clock: Clock | None = None,
    ) -> None:
        self._config = config
        self._client_snapshots = ClientSnapshotCache()
        self._tenants = dict(tenants)
        self._audit = audit
        self._clock = clock or SystemClock()

    def server(self) -> Server[Any]:
        """A low-level ``mcp`` server answering ``tools/list`` and ``tools/call``."""
        server: Server[Any] = Server(
            "esra",
            version=__version__,
            title="ESRA enterprise search",
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
            # Header validation needs no lookup: no schema declares Mcp-Param headers, and a
            # lookup would run outside the caller's authorization.
            get_tool_input_schema=lambda _name: None,
        )
        server.middleware.append(self._audit_refused_calls)
        return server

    async def _audit_refused_calls(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Audit a ``tools/call`` the SDK refuses before the handler runs.

        The SDK validates a call's params itself (``arguments`` an object, ``name`` a string)
        and answers a malformed one with JSON-RPC ``INVALID_PARAMS`` without calling
        ``_on_call_tool``. That answer is kept — it is the same whatever tool was named — but
        the call is audited like any refused call: ``denied`` when it names no tool this
        caller can see, else ``rejected`` as invalid arguments.
        """
        if ctx.method != "tools/call":
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        except (MCPError, ValidationError) as exc:
            if isinstance(exc, MCPError) and exc.code != INVALID_PARAMS:
                raise
            try:
                await self._record_refused(current_caller(), ctx.params)
            except Exception:
                # As for any call whose audit record cannot be written: ESRA_INTERNAL, no detail.
                _log.exception("auditing a malformed tool call failed")
                raise _internal_error() from None
            raise

    async def _record_refused(
        self, caller: AuthenticatedCaller | None, params: Mapping[str, Any] | None
    ) -> None:
        if caller is None:
            return
        name = params.get("name") if isinstance(params, Mapping) else None
        name = name if isinstance(name, str) else ""
        tool = (await self.visible_to(caller)).get(name)
        ctx = caller.context(tool.exposure.slug if tool else "", uuid.uuid4().hex)
        if tool is None:
            await self._record(ctx, caller, name, outcome="denied", error=ExposureNotFoundError())
            return
        error = InvalidRequestError("The arguments must be an object.")
        await self._record(ctx, caller, name, outcome="rejected", error=error)

    async def visible_to(self, caller: AuthenticatedCaller) -> dict[str, PublishedTool]:
        """The tools ``caller`` may see and call, by name."""
        return (await self._visible(caller))[1]

    async def definitions_for(self, caller: AuthenticatedCaller) -> list[Tool]:
        """The definitions of the tools ``caller`` may see, sorted by name.

        A search tool's schema lists the fields this caller may filter on, resolved from
        the same snapshot as the list itself, through the core's scope resolution: a field of
        a source outside the caller's scope, or one restricted or hidden, is never named.
        """
        snapshot, tools = await self._visible(caller)
        if snapshot is None:
            return []
        capabilities = self._tenants[caller.tenant_id].retriever.capabilities
        definitions = []
        for name in sorted(tools):
            tool = tools[name]
            fields: tuple[CallerFilterField, ...] = ()
            if tool.kind is ToolKind.SEARCH:
                probe = caller.context(tool.exposure.slug, correlation_id="tools-list")
                fields = await listed_filter_fields(probe, snapshot, capabilities)
            definitions.append(tool.definition(fields))
        return definitions

    async def _visible(
        self, caller: AuthenticatedCaller
    ) -> tuple[ConfigSnapshot | None, dict[str, PublishedTool]]:
        services = self._tenants.get(caller.tenant_id)
        if services is None:
            return None, {}
        tenant_snapshot = await self._config.snapshot(caller.tenant_id)
        if tenant_snapshot is None:
            return None, {}
        # The caller's client application's runtime snapshot: the list, the schemas and the
        # call's authorization all read only what that application may reach.
        snapshot = self._client_snapshots.of(tenant_snapshot, caller.client_app_id)
        tools: dict[str, PublishedTool] = {}
        clashing: set[str] = set()
        for tool in self._published(caller, snapshot, fetch=services.fetcher is not None):
            if tool.name in tools:
                clashing.add(tool.name)
            tools[tool.name] = tool
        for name in clashing:
            # e.g. slug "a_fetch" beside slug "a" with fetch on: publish neither, rather than
            # let the caller reach a tool other than the one the name suggests.
            _log.error("tenant %s publishes the tool %s twice; hiding it", caller.tenant_id, name)
            del tools[name]
        return snapshot, tools

    def _published(
        self, caller: AuthenticatedCaller, snapshot: ConfigSnapshot, *, fetch: bool
    ) -> list[PublishedTool]:
        tools: list[PublishedTool] = []
        for exposure in sorted(snapshot.exposures, key=lambda e: e.slug):
            probe = caller.context(exposure.slug, correlation_id="tools-list")
            # The pipeline's own access decision, so a listed tool is exactly a callable one.
            if admitted_exposure(probe, snapshot) is not exposure:
                continue
            capability = snapshot.capability(exposure.capability_id)
            name = capability.name if capability is not None else exposure.slug
            with_fetch = fetch and exposure.fetch_enabled
            search = PublishedTool(exposure.tool_name, ToolKind.SEARCH, exposure, name, with_fetch)
            tools.append(search)
            if with_fetch:
                fetch_name = exposure.tool_name + FETCH_SUFFIX
                tools.append(PublishedTool(fetch_name, ToolKind.FETCH, exposure, name))
        return tools

    async def _on_list_tools(
        self, _ctx: ServerRequestContext[Any], _params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        try:
            caller = current_caller()
            if caller is None:
                return ListToolsResult(tools=[])
            return ListToolsResult(tools=await self.definitions_for(caller))
        except Exception:
            # Without this, the SDK's handshake-era dispatcher answers str(exc) to the client
            # (a driver's text, a host name); the detail belongs in the log only.
            _log.exception("unclassified failure listing tools")
            raise _internal_error() from None

    async def _on_call_tool(
        self, _ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        try:
            return await self.call(current_caller(), params.name, params.arguments)
        except Exception:
            _log.exception("unclassified failure in a tool call")
            return error_result(EsraError())

    async def call(
        self, caller: AuthenticatedCaller | None, name: str, arguments: object
    ) -> CallToolResult:
        """Authorize, audit and run one call of the tool ``name`` for ``caller``.

        The call's audit records are waited for once, before it is answered, rather than one
        commit after another (``deferred_audit_waits``); if they cannot be written, the
        caller gets the error, never the results.
        """
        started = time.perf_counter()
        tool = (await self.visible_to(caller)).get(name) if caller is not None else None
        try:
            async with deferred_audit_waits():
                result = await self._call(caller, tool, name, arguments)
        except AuditUnavailableError as exc:
            result = error_result(exc)
        attributes: dict[str, str] = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            # Only a tool this caller was offered names the series: any other name is the
            # caller's to invent, well-formed or not, and a series per invented name would
            # grow with traffic.
            "gen_ai.tool.name": tool.name if tool is not None else "(unknown)",
            TENANT_ID: caller.tenant_id if caller is not None else "",
        }
        if result.is_error:
            attributes["error.type"] = "tool_error"
        _CALL_DURATION.record(time.perf_counter() - started, attributes)
        return result

    async def _call(
        self,
        caller: AuthenticatedCaller | None,
        tool: PublishedTool | None,
        name: str,
        arguments: object,
    ) -> CallToolResult:
        """Run the call of ``name``; ``tool`` is the tool of that name ``caller`` is offered."""
        if caller is None:
            return error_result(ExposureNotFoundError())
        ctx = caller.context(tool.exposure.slug if tool else "", uuid.uuid4().hex)
        # The MCP SDK's server span of this call is current: it gets the tenant and the
        # correlation id the call's audit records carry, so one leads to the other.
        call_span = trace.get_current_span()
        call_span.set_attributes(invocation_attributes(ctx))
        if tool is None:
            await self._record(ctx, caller, name, outcome="denied", error=ExposureNotFoundError())
            return error_result(ExposureNotFoundError())
        try:
            parsed = _parse(tool.kind, arguments)
        except InvalidRequestError as exc:
            await self._record(ctx, caller, name, outcome="rejected", error=exc)
            return error_result(exc)
        await self._record(ctx, caller, name)
        try:
            return await self._run(self._tenants[caller.tenant_id], ctx, parsed)
        except EsraError as exc:
            # The pipeline audited its own outcome (esra.retrieve / esra.fetch).
            call_span.set_attribute("esra.error.code", exc.code.value)
            return error_result(exc)

    @staticmethod
    async def _run(
        services: TenantServices,
        ctx: InvocationContext,
        arguments: SearchArguments | FetchArguments,
    ) -> CallToolResult:
        if isinstance(arguments, SearchArguments):
            request = RetrievalRequest(arguments.prompt, arguments.filters, arguments.top_k)
            response = await services.retriever.retrieve(ctx, request)
            return success_result(search_output(response))
        if services.fetcher is None:  # a fetch tool is listed only with a fetcher
            raise ExposureNotFoundError
        document = await services.fetcher.fetch(
            ctx, arguments.document_ref, offset=arguments.offset, max_chars=arguments.max_chars
        )
        return success_result(fetch_output(document))

    async def _record(
        self,
        ctx: InvocationContext,
        caller: AuthenticatedCaller,
        name: str,
        *,
        outcome: str = "ok",
        error: EsraError | None = None,
    ) -> None:
        await self._audit.record(
            AuditRecord.of(
                ctx,
                self._clock,
                AuditEvent.INVOKE,
                outcome=outcome,
                reason=error.code.value if error is not None else None,
                dimensions={
                    "tool": name if _TOOL_NAME.fullmatch(name) else "(invalid)",
                    "exposure": ctx.exposure_slug,
                    "client_app": caller.client_app_id,
                    "subject": caller.subject,
                    "issuer": caller.issuer,
                },
            )
        )


def _internal_error() -> MCPError:
    """The JSON-RPC error of a failed request that has no tool error to give: the core's
    ``ESRA_INTERNAL`` with its fixed text, exactly as a failed call reads, and no detail."""
    error = EsraError()
    return MCPError(code=INTERNAL_ERROR, message=f"{error.code.value}: {error}")


def _parse(kind: ToolKind, arguments: object) -> SearchArguments | FetchArguments:
    if kind is ToolKind.SEARCH:
        return parse_search_arguments(arguments)
    return parse_fetch_arguments(arguments)
