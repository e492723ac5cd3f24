"""The tools each caller sees and what calling them does, over HTTP with signed JWTs."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from esra.core._audit.record import AuditRecord
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.codes import AuditEvent
from esra.core.config import AccessPolicy
from esra.core.exceptions import ConfigurationError
from esra.core.testing import (
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemorySearchProvider,
)
from esra.starlette._tools import EsraTools, TenantServices
from tests.core.factories import make_exposure
from tests.starlette._tokens import idp, other_idp
from tests.starlette._world import TENANT_A, TENANT_B, mcp_client, open_world, snapshot_a

UNKNOWN_TOOL = "ESRA_EXPOSURE_NOT_FOUND: No such tool."


async def _tool_names(token: str) -> list[str]:
    async with open_world() as world, mcp_client(world.app, token) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


def _text(result: CallToolResult) -> str:
    first = result.content[0]
    assert first.type == "text"
    return first.text


async def test_a_caller_sees_the_tools_its_access_policy_admits() -> None:
    """Published, in the audience, policy satisfied; the fetch tool only where enabled."""
    assert await _tool_names(idp().token()) == ["esra_hr_search", "esra_hr_search_fetch"]
    with_department = await _tool_names(idp().token(department="finance"))
    assert with_department == ["esra_hr_search", "esra_hr_search_fetch", "esra_payroll"]


async def test_the_audience_decides_by_client_application() -> None:
    """A caller from app-2 sees only the exposure published to app-2."""
    assert await _tool_names(idp().token(azp="app-2")) == ["esra_partner_search"]


async def test_tenant_b_never_sees_tenant_a_tools() -> None:
    """B's token lists B's tool only, from either issuer trusted for B."""
    for token in (idp().token(esra_tenant=TENANT_B), other_idp().token(esra_tenant=TENANT_B)):
        assert await _tool_names(token) == ["esra_hr_search"]


async def test_a_tenant_the_host_does_not_serve_sees_no_tools() -> None:
    """A valid token for a tenant without services lists nothing."""
    assert await _tool_names(idp().token(esra_tenant="tenant-c")) == []


async def test_a_tool_the_caller_cannot_see_looks_exactly_like_an_unknown_tool() -> None:
    """Another tenant's tool, a policy-refused tool, an unpublished one: one answer for all."""
    async with open_world() as world, mcp_client(world.app, idp().token()) as client:
        answers = [
            await client.call_tool(name, {"prompt": "leave"})
            for name in ("esra_payroll", "esra_partner_search", "esra_draft", "esra_nothing")
        ]
    assert {(r.is_error, _text(r), r.structured_content) for r in answers} == {
        (True, UNKNOWN_TOOL, None)
    }
    denied = world.audit.events(AuditEvent.INVOKE)
    assert [r.outcome for r in denied] == ["denied"] * 4
    assert {r.tenant_id for r in denied} == {TENANT_A}
    assert not world.audit.events(AuditEvent.RETRIEVE)


async def test_tenant_b_calling_the_shared_tool_name_searches_only_tenant_b() -> None:
    """Both tenants publish esra_hr_search; B's call reaches B's provider and rows only."""
    async with (
        open_world() as world,
        mcp_client(world.app, other_idp().token(esra_tenant=TENANT_B)) as client,
    ):
        result = await client.call_tool("esra_hr_search", {"prompt": "leave policy"})
    assert not result.is_error
    assert result.structured_content is not None
    titles = [r["title"] for r in result.structured_content["results"]]
    assert titles == ["Beta leave policy"]
    assert not world.providers[TENANT_A].executed
    assert {r.tenant_id for r in world.audit.records} == {TENANT_B}


async def _search(client: Client, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool("esra_hr_search", {"prompt": "leave", **arguments})
    assert not result.is_error, _text(result)
    output: dict[str, Any] | None = result.structured_content
    assert output is not None
    return output


async def test_search_returns_structured_results_with_document_refs() -> None:
    """The structured output carries results, status, warnings and a fetchable documentRef."""
    async with open_world() as world, mcp_client(world.app, idp().token()) as client:
        output = await _search(client)
    assert output["status"] == "complete"
    assert output["warnings"] == []
    first = output["results"][0]
    assert first["title"].startswith("Alpha")
    assert first["source"] == "Source s-1"
    assert first["fragments"]
    assert first["provenance"]["rank"] == 1
    assert first["provenance"]["resultId"].startswith("r_")
    assert isinstance(first["documentRef"], str)
    assert output["correlationId"]


async def test_top_k_narrows_the_results() -> None:
    """topK returns at most that many of the ranked results, in order."""
    async with open_world() as world, mcp_client(world.app, idp().token()) as client:
        everything = await _search(client)
        one = await _search(client, topK=1)
    assert len(everything["results"]) == 3
    assert [r["title"] for r in one["results"]] == [everything["results"][0]["title"]]


async def test_fetch_reads_a_surfaced_record_and_refuses_another_callers_ref() -> None:
    """A documentRef fetches its record for its caller; replayed by bob it is not found."""
    async with open_world() as world:
        async with mcp_client(world.app, idp().token()) as client:
            ref = (await _search(client))["results"][0]["documentRef"]
            fetched = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})
        async with mcp_client(world.app, idp().token(sub="bob")) as client:
            replayed = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})
    assert not fetched.is_error, _text(fetched)
    assert fetched.structured_content is not None
    assert fetched.structured_content["title"].startswith("Alpha")
    assert fetched.structured_content["text"]
    assert fetched.structured_content["hasMore"] is False
    assert replayed.is_error
    assert _text(replayed) == "ESRA_DOCUMENT_NOT_FOUND: No such document."


@pytest.mark.parametrize(
    ("arguments", "mentions"),
    [
        ({}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": "x" * 4001}, "prompt"),
        ({"prompt": "leave", "topK": 0}, "topK"),
        ({"prompt": "leave", "topK": "3"}, "topK"),
        ({"prompt": "leave", "topK": True}, "topK"),
        ({"prompt": "leave", "year": 2026}, "accepted: filters, prompt, topK"),
        ({"prompt": "leave", "filters": {"year": 2026}}, "filters"),
        ({"prompt": "leave", "filters": [{"field": "year", "value": 1}]}, "field, operator"),
        (
            {"prompt": "leave", "filters": [{"field": "y", "operator": "like", "value": 1}]},
            "operator must be one of",
        ),
        (
            {"prompt": "leave", "filters": [{"field": "y", "operator": "eq", "value": {}}]},
            "filter value",
        ),
        (
            {"prompt": "leave", "filters": [{"field": "y", "operator": "in", "value": []}]},
            "1 to 50 values",
        ),
        (
            {"prompt": "leave", "filters": [{"field": "y", "operator": "eq", "value": 1}] * 9},
            "at most 8",
        ),
    ],
)
async def test_invalid_arguments_are_refused_before_the_pipeline(
    arguments: dict[str, Any], mentions: str
) -> None:
    """Bad arguments are ESRA_INVALID_REQUEST, audited as rejected; nothing is searched."""
    async with open_world() as world, mcp_client(world.app, idp().token()) as client:
        result = await client.call_tool("esra_hr_search", arguments)
    assert result.is_error
    assert _text(result).startswith("ESRA_INVALID_REQUEST: ")
    assert mentions in _text(result)
    assert [r.outcome for r in world.audit.events(AuditEvent.INVOKE)] == ["rejected"]
    assert not world.providers[TENANT_A].executed


async def test_each_call_is_audited_before_the_pipeline_runs() -> None:
    """esra.invoke (tenant, client app, tool, outcome) precedes the pipeline's records."""
    async with open_world() as world, mcp_client(world.app, idp().token()) as client:
        await _search(client)
    events = [r.event for r in world.audit.records]
    assert events[0] is AuditEvent.INVOKE
    assert AuditEvent.RETRIEVE in events
    invoke = world.audit.records[0]
    assert invoke.tenant_id == TENANT_A
    assert invoke.outcome == "ok"
    assert invoke.dimensions["tool"] == "esra_hr_search"
    assert invoke.dimensions["client_app"] == "app-1"
    assert {r.correlation_id for r in world.audit.records} == {invoke.correlation_id}


class _FailingRetrieveAudit:
    """An audit sink that fails when the pipeline records its outcome."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        if record.event is AuditEvent.RETRIEVE:
            msg = "audit backend down at /var/lib/secret.db"
            raise RuntimeError(msg)
        self.records.append(record)


async def test_an_unclassified_failure_is_esra_internal_without_detail() -> None:
    """Anything unclassified reaches the client as ESRA_INTERNAL with the fixed message."""
    async with (
        open_world(audit=_FailingRetrieveAudit()) as world,
        mcp_client(world.app, idp().token()) as client,
    ):
        result = await client.call_tool("esra_hr_search", {"prompt": "leave"})
    assert result.is_error
    assert _text(result) == "ESRA_INTERNAL: The request could not be completed."


async def test_a_caller_without_a_token_is_refused_and_sees_no_tools() -> None:
    """No bearer token: the SDK client fails with 401; in-process there are no tools."""
    async with open_world() as world:
        with pytest.raises(ExceptionGroup) as refused:
            async with mcp_client(world.app, None) as client:
                await client.list_tools()
        assert refused.group_contains(MCPError, depth=None)
        with pytest.raises(ExceptionGroup) as refused_by_token:
            async with mcp_client(world.app, idp().token(exp=1)) as client:
                await client.list_tools()
        assert refused_by_token.group_contains(MCPError, depth=None)


async def test_the_server_lists_nothing_for_an_unauthenticated_in_process_caller() -> None:
    """Without an authenticated caller (no bearer middleware), no tool exists."""
    audit = InMemoryAuditSink()
    config = StaticConfigRepository([snapshot_a()])
    retriever = Retriever(
        config=config,
        providers={"s-1": InMemorySearchProvider({})},
        model=FakeLanguageModel(),
        audit=audit,
        tenant_id=TENANT_A,
    )
    tools = EsraTools(
        config=config, tenants={TENANT_A: TenantServices(retriever=retriever)}, audit=audit
    )
    async with Client(tools.server()) as client:
        assert (await client.list_tools()).tools == []
        result = await client.call_tool("esra_hr_search", {"prompt": "leave"})
    assert _text(result) == UNKNOWN_TOOL
    assert not audit.records


def test_a_tool_name_published_twice_is_refused_by_the_configuration() -> None:
    """Slug ``a_fetch`` beside slug ``a`` with fetch: the snapshot refuses the clash.

    The host still hides a clashing name (defence in depth), but no snapshot can carry one.
    """
    plain = make_exposure(exposure_id="e-a", tenant_id=TENANT_A, slug="a", fetch_enabled=True)
    clash = make_exposure(exposure_id="e-b", tenant_id=TENANT_A, slug="a_fetch")
    with pytest.raises(ConfigurationError, match="duplicate tool name 'esra_a_fetch'"):
        attrs.evolve(
            snapshot_a(),
            exposures=(plain, clash),
            access_policies=(AccessPolicy.matching(plain), AccessPolicy.matching(clash)),
        )
