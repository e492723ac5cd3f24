"""Retriever: the retrieval pipeline composed end to end for one invocation.

resolve scope → select → plan → validate → execute → aggregate → rerank → respond → answer.
Each stage lives in ``esra.core._pipeline``; this module only sequences them, audits what
the pure stages decided, enforces the invocation deadline and turns anything unclassified
into ``ESRA_INTERNAL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import unicodedata
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TypedDict

import attrs
from opentelemetry.trace import Span

from esra.core._audit.record import AuditRecord
from esra.core._clock import SystemClock
from esra.core._config.client_snapshot import ClientSnapshotCache
from esra.core._config.exposure import RetentionClass
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._context import InvocationContext
from esra.core._encodable import has_lone_surrogate
from esra.core._explain import ExplainingAuditSink, ExplainRecorder, Explanation, current_recorder
from esra.core._fetch.refs import DEFAULT_REF_TTL_S, DocumentRefMinter
from esra.core._fetch.tokens import Keyring
from esra.core._model_usage import current_meter, metered
from esra.core._pipeline.aggregation import aggregate
from esra.core._pipeline.answer import compose_answer
from esra.core._pipeline.caller_filters import (
    MAX_CALLER_FILTERS,
    apply_caller_filters,
    check_caller_filters,
    filters_digest,
    listed_filter_fields,
)
from esra.core._pipeline.content_generation import content_generation
from esra.core._pipeline.execution import Executor
from esra.core._pipeline.health import HEALTH_PROBE_TIMEOUT_S, HEALTH_TTL_S, SourceHealthMonitor
from esra.core._pipeline.invocation import Invocation
from esra.core._pipeline.metrics import (
    count_plan_rejection,
    count_result_cache_hit,
    count_source_dropped,
    count_warnings,
)
from esra.core._pipeline.planning import plan_searches
from esra.core._pipeline.rerank import rerank
from esra.core._pipeline.respond import respond
from esra.core._pipeline.result_cache import ResultCache
from esra.core._pipeline.scope import EffectiveScope, ScopedInvocation, resolve_scope
from esra.core._pipeline.selection import select_sources
from esra.core._pipeline.validation import ValidationOutcome, validate
from esra.core._prompts.model import datamark_for
from esra.core._query import PlannedFilter
from esra.core._request import RetrievalRequest
from esra.core._response import ResponseWarning, RetrievalResponse
from esra.core._telemetry import inert_span, stage_span
from esra.core._traced_model import TracedLanguageModel
from esra.core.codes import AuditEvent, WarningCode
from esra.core.exceptions import EsraError, ExposureNotFoundError, InvalidRequestError
from esra.core.ports import (
    AuditSink,
    Cache,
    Clock,
    ConfigRepository,
    LanguageModel,
    ProviderCapabilities,
    SearchProvider,
)

__all__ = ["MAX_REQUEST_CHARS", "RESPONSE_RESERVE_SHARE", "Retriever"]

MAX_REQUEST_CHARS = 4_000
# The rerank's model call may run until this share of the invocation timeout is left before
# the deadline (2 s of the default 20 s). What follows the rerank must still fit: respond()
# (allowlist, masking, size cap, sanitization), the answer when the exposure asks for one,
# and the audit records. A rerank that ran into the deadline itself would discard every
# result already found, while one cut off in time falls back to the search order with
# ESRA_RERANK_FALLBACK. A share rather than fixed seconds, so that a capability with a short
# timeout keeps most of it for the rerank instead of losing all of it to the reserve.
RESPONSE_RESERVE_SHARE = 0.1

_log = logging.getLogger(__name__)


class Retriever:
    """Runs invocations against a tenant's configuration, through injected ports.

    One instance serves a runtime instance: it owns the executor (breakers and the
    instance-wide concurrency bound) and the providers' health, probed once per source at a
    time, within a bound, and kept briefly (see ``esra.core._pipeline.health``).

    Args:
        config: where tenant snapshots come from.
        providers: the search provider of each source, keyed by source id. The mapping is
            kept, not copied: a provider added, replaced or removed later (a publication
            applied live, see ``esra.core._live_config``) is used by the next invocation. A
            source of the snapshot without a provider is unavailable (fail closed).
        model: the language model for selection, planning, reranking and answers.
        audit: where audit records go.
        clock: time source (defaults to the system clock).
        cache: optional cache for selections and, where a capability's
            ``limits.result_cache_ttl_s`` turns it on, whole responses (see
            ``esra.core._pipeline.result_cache``).
        executor: optional pre-built executor (for custom bounds).
        keyring: keys for results' ``document_ref``; without it no result carries one, even
            on an exposure that enables fetch.
        document_ref_ttl_s: how long a ``document_ref`` stays openable (positive, at most a
            year).
        tenant_id: the one tenant this instance serves. Providers are keyed by source id,
            and source ids are unique only within a tenant, so an instance whose providers
            hold one tenant's data should be bound to it: a context of any other tenant is
            then refused as ``ESRA_EXPOSURE_NOT_FOUND`` before its snapshot is read, and can
            never run that tenant's configuration against these providers.
        health_ttl_s: how long one health probe's answer about a source is used.
        health_probe_timeout_s: the longest a source's health probe may take; a source
            whose provider has not answered by then is unavailable until the next probe.
    """

    def __init__(
        self,
        *,
        config: ConfigRepository,
        providers: Mapping[str, SearchProvider],
        model: LanguageModel,
        audit: AuditSink,
        clock: Clock | None = None,
        cache: Cache | None = None,
        executor: Executor | None = None,
        keyring: Keyring | None = None,
        document_ref_ttl_s: float = DEFAULT_REF_TTL_S,
        tenant_id: str | None = None,
        health_ttl_s: float = HEALTH_TTL_S,
        health_probe_timeout_s: float = HEALTH_PROBE_TIMEOUT_S,
    ) -> None:
        if not 0 < document_ref_ttl_s <= _MAX_REF_TTL_S:
            msg = f"document_ref_ttl_s must be positive and at most {_MAX_REF_TTL_S:.0f} s"
            raise ValueError(msg)
        self._config = config
        self._client_snapshots = ClientSnapshotCache()
        # The live mapping itself: publications applied while the host runs change it.
        self._providers = providers
        # Every call a chat span (a no-op until an OpenTelemetry SDK is installed).
        self._model = TracedLanguageModel(model)
        # Marks and keeps the records of an invocation being explained (esra.core._explain).
        self._audit = ExplainingAuditSink(audit)
        self._clock = clock or SystemClock()
        self._cache = cache
        self._executor = executor or Executor(clock=self._clock)
        self._health = SourceHealthMonitor(
            self._providers,
            clock=self._clock,
            ttl_s=health_ttl_s,
            timeout_s=health_probe_timeout_s,
        )
        self._keyring = keyring
        self._ref_ttl_s = document_ref_ttl_s
        self._tenant_id = tenant_id

    @property
    def executor(self) -> Executor:
        """The executor searches run through; pass it to ``DocumentFetcher`` to share breakers."""
        return self._executor

    @property
    def capabilities(self) -> dict[str, ProviderCapabilities]:
        """What each source's provider supports, by source id (a tool's filter schema uses it)."""
        return {source_id: p.capabilities for source_id, p in self._providers.items()}

    async def retrieve(
        self,
        ctx: InvocationContext,
        request: RetrievalRequest | str,
        *,
        filters: Sequence[PlannedFilter] = (),
    ) -> RetrievalResponse:
        """Answer ``request`` for the caller in ``ctx``.

        ``request`` is a ``RetrievalRequest`` (prompt, the caller's filters on business
        fields, top-K), or the prompt alone with the caller's ``filters`` beside it.

        Raises:
            InvalidRequestError: the prompt is empty or too long, too many filters, a
                top-K below 1, or filters given both in the request and beside it.
            ExposureNotFoundError: no such published exposure for this caller.
            NoSourcesAvailableError: nothing in scope.
            EsraError: ``ESRA_INTERNAL`` for anything unclassified (detail logged only).
        """
        asked = _checked(request, filters)
        try:
            # Remote model clients report token usage into this invocation's meter; the
            # totals go on its esra.retrieve record (see esra.core._model_usage).
            with metered(), stage_span("retrieve", ctx, attributes=_exposure_of(ctx)):
                return await self._retrieve(ctx, asked)
        except EsraError:
            raise
        except Exception as exc:
            _log.exception("unclassified failure in invocation %s", ctx.correlation_id)
            failure = EsraError()
            # The invocation's outcome is on the trail whatever ended it, as a fetch's is: the
            # classified ends record themselves, an unclassified one is recorded here. A sink
            # that fails unclassified too (it may be what failed) leaves the failure as it is.
            try:
                await self._record(
                    ctx, AuditEvent.RETRIEVE, outcome="failed", reason=failure.code.value
                )
            except EsraError:
                raise
            except Exception:
                _log.exception("could not audit failed invocation %s", ctx.correlation_id)
            raise failure from exc

    async def explain(
        self,
        ctx: InvocationContext,
        request: RetrievalRequest | str,
        *,
        explained_by: str,
        filters: Sequence[PlannedFilter] = (),
    ) -> Explanation:
        """Run ``request`` for the caller in ``ctx`` and return what the pipeline decided.

        For an operator only (the host checks the role): the invocation runs as
        ``retrieve`` would, bypassing the result cache, while an ``ExplainRecorder`` keeps
        its decisions (see ``esra.core._explain``). Its audit records are marked as explained
        by ``explained_by``. An invocation that ends in a classified error is explained up
        to that error; an unclassified one is ``ESRA_INTERNAL`` as in ``retrieve``.

        Raises:
            InvalidRequestError: the request is empty or too long, or too many filters.
        """
        asked = _checked(request, filters)
        recorder = ExplainRecorder(clock=self._clock, explained_by=explained_by)
        response: RetrievalResponse | None = None
        error: str | None = None
        with recorder.active():
            try:
                with metered(), stage_span("retrieve", ctx, attributes=_exposure_of(ctx)):
                    response = await self._retrieve(ctx, asked, use_result_cache=False)
            except EsraError as exc:
                error = exc.code.value
            except Exception:
                _log.exception(
                    "unclassified failure in explained invocation %s", ctx.correlation_id
                )
                error = EsraError.code.value
        return recorder.explanation(
            tenant_id=ctx.tenant_id,
            exposure=ctx.exposure_slug,
            correlation_id=ctx.correlation_id,
            response=response,
            error=error,
        )

    async def _retrieve(
        self, ctx: InvocationContext, asked: RetrievalRequest, *, use_result_cache: bool = True
    ) -> RetrievalResponse:
        request, filters = asked.prompt, asked.filters
        if self._tenant_id is not None and ctx.tenant_id != self._tenant_id:
            # Another tenant's caller must not see its configuration run against this
            # tenant's providers; it sees the same error as an unknown tool.
            raise ExposureNotFoundError
        tenant_snapshot = await self._config.snapshot(ctx.tenant_id)
        if tenant_snapshot is None:
            raise ExposureNotFoundError
        # Spec 003's runtime snapshot, keyed to the tenant and the client application: nothing
        # reserved to another application reaches the stages (scope still checks it all).
        snapshot = self._client_snapshots.of(tenant_snapshot, ctx.client_app_id)
        invocation = Invocation.start(ctx, clock=self._clock, audit=self._audit)
        # Probed inside resolution, after the four levels: only sources this caller may use.
        async with _stage("scope", invocation) as span:
            scope = await resolve_scope(
                invocation, snapshot, health={}, probe=self._health.health_of
            )
            span.set_attribute("esra.sources.in_scope", len(scope.sources))
        if asked.top_k is not None and asked.top_k < scope.exposure.top_k:
            # The caller wants fewer: this invocation's exposure returns fewer, so the answer
            # is composed from exactly what the caller gets, and the cache keys on it.
            exposure = attrs.evolve(scope.exposure, top_k=asked.top_k)
            scope = attrs.evolve(scope, exposure=exposure)
        if filters:
            await self._check_filters(ctx, snapshot, filters)
        results = (
            await self._result_cache(ctx, scope, request, filters) if use_result_cache else None
        )
        if results is not None:
            cached = await results.load(self._refs(ctx))
            if cached is not None:
                count_result_cache_hit(ctx.tenant_id)
                await self._audit_cache_hit(ctx, cached)
                return cached
        try:
            async with asyncio.timeout(scope.limits.invocation_timeout_s) as deadline:
                response = await self._run_stages(
                    ScopedInvocation.of(invocation, scope),
                    request,
                    filters,
                    deadline=deadline.when(),
                )
        except TimeoutError:
            warning = ResponseWarning(
                WarningCode.ESRA_INVOCATION_DEADLINE,
                "The search did not finish within its time limit; no results were returned.",
            )
            response = respond(
                (),
                scope=scope,
                warnings=(*scope.warnings, warning),
                correlation_id=ctx.correlation_id,
                source_names={},
            )
            await self._audit_outcome(ctx, response, executed=0, filters=filters)
            return response
        if results is not None:
            await results.store(response)
        return response

    async def _check_filters(
        self, ctx: InvocationContext, snapshot: ConfigSnapshot, filters: tuple[PlannedFilter, ...]
    ) -> None:
        """Refuse, before any model call, a filter the caller's tool schema does not offer.

        The allowed fields are the ones ``tools/list`` publishes (configured health, not this
        call's probe): a field listed to the caller is never refused because its source is
        down at the moment, which the response's ``ESRA_SOURCE_UNAVAILABLE`` says instead.
        A field not listed is refused with one message whatever it is, restricted or
        nonexistent.
        """
        allowed = await listed_filter_fields(ctx, snapshot, self.capabilities)
        try:
            check_caller_filters(filters, allowed)
        except InvalidRequestError as exc:
            await self._record(
                ctx,
                AuditEvent.RETRIEVE,
                outcome="rejected",
                reason=exc.code.value,
                caller_filters=_field_names(filters),
            )
            raise

    async def _result_cache(
        self,
        ctx: InvocationContext,
        scope: EffectiveScope,
        request: str,
        filters: tuple[PlannedFilter, ...],
    ) -> ResultCache | None:
        """The invocation's result cache, unless off, forbidden by the retention class, or
        the tenant's content generation cannot be read (a stale entry could be served)."""
        if (
            self._cache is None
            or scope.limits.result_cache_ttl_s <= 0
            or scope.exposure.retention is RetentionClass.NO_PROMPT_DERIVATIVES
        ):
            return None
        generation = await content_generation(self._cache, ctx.tenant_id)
        if generation is None:
            return None
        return ResultCache(
            self._cache,
            ctx,
            scope,
            request,
            clock=self._clock,
            keyring=self._keyring,
            generation=generation,
            filters=filters_digest(filters),
        )

    async def _audit_cache_hit(self, ctx: InvocationContext, response: RetrievalResponse) -> None:
        await self._record(
            ctx,
            AuditEvent.RETRIEVE,
            outcome=response.status.value,
            results=len(response.results),
            queries=0,
            warnings=tuple(sorted({w.code.value for w in response.warnings})),
            cache="hit",
        )

    async def _run_stages(
        self,
        invocation: ScopedInvocation,
        request: str,
        filters: tuple[PlannedFilter, ...],
        *,
        deadline: float | None,
    ) -> RetrievalResponse:
        """Run every stage; ``deadline`` is the event-loop time the invocation must end by."""
        ctx, scope = invocation.ctx, invocation.scope
        source_names = {s.source.id: s.source.name for s in scope.sources}
        explain = current_recorder()
        async with _stage("selection", invocation) as span:
            selection = await select_sources(
                invocation, request, model=self._model, cache=self._cache
            )
            span.set_attribute("esra.sources.selected", [s.source.id for s in selection.sources])
        capabilities = {
            s.source.id: self._providers[s.source.id].capabilities
            for s in selection.sources
            if s.source.id in self._providers
        }
        async with _stage("planning", invocation) as span:
            planning = await plan_searches(
                invocation, selection, request, model=self._model, capabilities=capabilities
            )
            span.set_attribute("esra.queries.planned", len(planning.queries))
        if explain is not None:
            explain.saw_plans(planning.queries)
        async with _stage("validation", invocation) as span:
            narrowed = apply_caller_filters(
                planning.queries,
                filters,
                scope=scope,
                source_names=source_names,
                capabilities=self.capabilities,
            )
            validation = validate(
                narrowed.queries,
                ctx=ctx,
                selection=selection,
                scope=scope,
                capabilities=capabilities,
            )
            span.set_attribute("esra.queries.validated", len(validation.queries))
            in_scope = {s.source.id for s in scope.sources}
            for rejection in validation.rejections:
                # A guardrail decision: the reason code and the source (the model's text, so
                # named only when it is a source in scope), never the plan itself.
                source = (
                    rejection.source_id if rejection.source_id in in_scope else "(not in scope)"
                )
                span.add_event(
                    "esra.guardrail.plan_rejected",
                    {"esra.reason": rejection.reason.value, "esra.source.id": source},
                )
                count_plan_rejection(ctx.tenant_id, rejection.reason.value)
            await self._audit_validation(ctx, scope, validation)
        if explain is not None:
            explain.saw_validation(validation)
        async with _stage("execution", invocation) as span:
            execution = await self._executor.execute(
                validation.queries,
                providers=self._providers,
                limits=scope.limits,
                source_names=source_names,
                systems={s.source.id: s.source.provider_kind for s in scope.sources},
            )
            span.set_attribute("esra.sources.failed", len(execution.failures))
        if explain is not None:
            explain.saw_execution(execution, self._providers)
        for failure in execution.failures:
            count_source_dropped(ctx.tenant_id, failure.code.value)
            await self._record(
                ctx,
                AuditEvent.QUERY_FAILED,
                outcome="failed",
                reason=failure.code.value,
                source_id=failure.source_id,
            )
        async with _stage("aggregation", invocation) as span:
            candidates = aggregate(
                execution.results,
                priority={s.source.id: s.source.priority_weight for s in scope.sources},
                now=self._clock.now(),
            )
            span.set_attribute("esra.candidates", len(candidates))
        if explain is not None:
            explain.saw_candidates(len(candidates))
        async with _stage("rerank", invocation) as span:
            reranked = await rerank(
                request,
                candidates,
                model=self._model,
                weights=scope.capability.rerank_weights,
                max_candidates=scope.limits.max_rerank_candidates,
                fragment_chars=scope.exposure.fragment_chars,
                source_names=source_names,
                model_profile=scope.capability.model_profile,
                datamark=datamark_for(scope.capability.datamark_untrusted),
                timeout_s=_rerank_budget(deadline, scope.limits.invocation_timeout_s),
            )
            span.set_attribute("esra.results.ranked", len(reranked.ranked))
        if reranked.unknown_ids:
            await self._record(
                ctx,
                AuditEvent.LLM_UNKNOWN_RESULT_REJECTED,
                outcome="rejected",
                count=reranked.unknown_ids,
            )
        warnings = (
            *scope.warnings,
            *selection.warnings,
            *planning.warnings,
            *narrowed.warnings,
            *validation.warnings,
            *execution.warnings,
            *reranked.warnings,
        )
        async with _stage("respond", invocation) as span:
            response = respond(
                reranked.ranked,
                scope=scope,
                warnings=warnings,
                correlation_id=ctx.correlation_id,
                source_names=source_names,
                refs=self._refs(ctx),
            )
            span.set_attribute("esra.results.returned", len(response.results))
        # Layer 6: after the size cap, so the answer model sees only what the caller gets.
        async with _stage("answer", invocation):
            response = await compose_answer(
                invocation, request, response, reranked.ranked, model=self._model
            )
        if explain is not None:
            explain.saw_ranking(reranked.ranked, response)
        await self._audit_outcome(ctx, response, executed=len(validation.queries), filters=filters)
        return response

    def _refs(self, ctx: InvocationContext) -> DocumentRefMinter | None:
        if self._keyring is None:
            return None
        return DocumentRefMinter(self._keyring, self._clock, ctx, self._ref_ttl_s)

    async def _audit_validation(
        self, ctx: InvocationContext, scope: EffectiveScope, outcome: ValidationOutcome
    ) -> None:
        known_mappings = {m.id for s in scope.sources for m in s.mappings}
        for rejection in outcome.rejections:
            # The mapping id is the model's text: echo it only when it names a mapping in
            # scope, so a guessed id of an unauthorized mapping never reaches the audit trail.
            mapping_id = (
                rejection.mapping_id if rejection.mapping_id in known_mappings else "(not in scope)"
            )
            await self._record(
                ctx,
                AuditEvent.PLAN_REJECTED,
                outcome="rejected",
                reason=rejection.reason.value,
                source_id=rejection.source_id,
                mapping_id=mapping_id,
            )
        for source_id in outcome.dropped_sources:
            await self._record(
                ctx,
                AuditEvent.SOURCE_DROPPED,
                outcome="denied",
                reason=WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM.value,
                source_id=source_id,
            )

    async def _audit_outcome(
        self,
        ctx: InvocationContext,
        response: RetrievalResponse,
        *,
        executed: int,
        filters: tuple[PlannedFilter, ...],
    ) -> None:
        count_warnings(ctx.tenant_id, response.warnings)
        meter = current_meter()
        filtered = _FilteredFields(caller_filters=_field_names(filters)) if filters else {}
        await self._record(
            ctx,
            AuditEvent.RETRIEVE,
            outcome=response.status.value,
            results=len(response.results),
            queries=executed,
            warnings=tuple(sorted({w.code.value for w in response.warnings})),
            **filtered,
            **(meter.dimensions() if meter is not None else {}),
        )

    async def _record(
        self,
        ctx: InvocationContext,
        event: AuditEvent,
        *,
        outcome: str,
        reason: str | None = None,
        **dimensions: str | int | tuple[str, ...],
    ) -> None:
        await self._audit.record(
            AuditRecord.of(
                ctx,
                self._clock,
                event,
                outcome=outcome,
                reason=reason,
                dimensions={
                    "exposure": ctx.exposure_slug,
                    "client_app": ctx.client_app_id,
                    **dimensions,
                },
            )
        )


@contextlib.asynccontextmanager
async def _stage(name: str, invocation: Invocation) -> AsyncIterator[Span]:
    """One stage's span, and its time when the invocation is being explained; what the stage
    noted on the audit trail is written when it ends, returned or raised."""
    recorder = current_recorder()
    if recorder is None and (inert := inert_span()) is not None:
        # Nothing records and nothing is timed (the usual call): no span to open or close.
        try:
            yield inert
        finally:
            await invocation.audit.write()
        return
    timed = recorder.stage(name) if recorder is not None else contextlib.nullcontext()
    with stage_span(name, invocation.ctx) as span, timed:
        try:
            yield span
        finally:
            await invocation.audit.write()


def _checked(request: RetrievalRequest | str, filters: Sequence[PlannedFilter]) -> RetrievalRequest:
    """The request as one value, its prompt stripped, after the checks every entry makes.

    Raises:
        InvalidRequestError: see ``Retriever.retrieve``.
    """
    if isinstance(request, str):
        asked = RetrievalRequest(request, tuple(filters))
    elif filters:
        msg = "Give the filters in the request or beside it, not both."
        raise InvalidRequestError(msg)
    else:
        asked = request
    text = asked.prompt.strip()
    if not text or len(text) > MAX_REQUEST_CHARS:
        msg = f"The request must be 1 to {MAX_REQUEST_CHARS} characters."
        raise InvalidRequestError(msg)
    if has_lone_surrogate(text):
        # No prompt, audit record or model request can carry it; refused as the MCP host
        # refuses such an argument, rather than failing later as ESRA_INTERNAL.
        msg = "The request must be Unicode text: it holds a lone surrogate."
        raise InvalidRequestError(msg)
    if not text.isprintable() and _only_controls(text):
        # Planning drops control characters from the words, so such a prompt is a blank
        # one that would cost the model calls before every query is rejected empty.
        msg = "The request must hold text, not only control characters."
        raise InvalidRequestError(msg)
    if len(asked.filters) > MAX_CALLER_FILTERS:
        msg = f"At most {MAX_CALLER_FILTERS} filters may be given."
        raise InvalidRequestError(msg)
    if asked.top_k is not None and asked.top_k < 1:
        msg = "topK must be at least 1."
        raise InvalidRequestError(msg)
    return attrs.evolve(asked, prompt=text)


# A year: far past any sensible reference lifetime (the host allows a week), and far short
# of what a reference's expiry can hold. An infinite one passed "> 0" and then failed every
# search of a fetch-enabled exposure as ESRA_INTERNAL, minting its first reference.
_MAX_REF_TTL_S = 365 * 24 * 3600.0


def _only_controls(text: str) -> bool:
    """Whether ``text`` holds nothing but whitespace and control characters (Cc)."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cc" for ch in text)


def _rerank_budget(deadline: float | None, invocation_timeout_s: float) -> float | None:
    """The rerank model call's time: what is left before ``deadline`` less the reserve.

    See ``RESPONSE_RESERVE_SHARE``. Measured on the event loop's clock, the one the deadline
    is kept by; ``None`` when there is no deadline.
    """
    if deadline is None:
        return None
    left = deadline - asyncio.get_running_loop().time()
    return left - RESPONSE_RESERVE_SHARE * invocation_timeout_s


class _FilteredFields(TypedDict, total=False):
    caller_filters: tuple[str, ...]


def _field_names(filters: tuple[PlannedFilter, ...]) -> tuple[str, ...]:
    """The fields a caller filtered on, for the audit record; never the values, which may be
    as sensitive as the prompt."""
    return tuple(sorted({f.field for f in filters}))


def _exposure_of(ctx: InvocationContext) -> dict[str, str]:
    return {"esra.exposure": ctx.exposure_slug}
