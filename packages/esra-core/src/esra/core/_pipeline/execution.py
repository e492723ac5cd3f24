"""Stage 5 — execute validated queries: bounded parallel, resilient per source.

Concurrency is bounded at four levels (spec 000 §5): per invocation, per source, per provider
object and per runtime instance. Each attempt runs through the per-source resilience pipeline
of ``esra.core._pipeline.resilience``, outer to inner: transient-only retry → circuit breaker →
the four limiters → attempt timeout. The limiters sit inside the breaker and outside the
timeout, so waiting for a slot never counts against an attempt, and no slot is held during a
retry's backoff.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence

import attrs

from esra.core._config.capability import CapabilityLimits
from esra.core._pipeline.breaker_sharing import BreakerSharing
from esra.core._pipeline.metrics import count_breaker_transition
from esra.core._pipeline.query_spans import db_system, failed, query_span, timed_attempt
from esra.core._pipeline.resilience import (
    BreakerState,
    CircuitBreaker,
    ProviderLimiters,
    bounded_semaphore,
    retry_transient,
)
from esra.core._pipeline.values import ValidatedQuery, ensure_validated
from esra.core._query import ResultRow
from esra.core._response import ResponseWarning
from esra.core.codes import ProviderErrorCode, WarningCode
from esra.core.exceptions import ProviderError
from esra.core.ports import BreakerBroadcast, Clock, SearchProvider

__all__ = ["ExecutionOutcome", "Executor", "QueryResult", "SourceFailure"]

_log = logging.getLogger(__name__)
# The query's own fault, not the source's: a statement the engine refuses as built (its
# syntax, or a value too long for the engine's parameter). The source answered, or was
# never asked, so the breaker learns nothing from it; counted, a caller steering the planner
# into such queries would open the source's breaker for every caller of the tenant.
_QUERY_FAULTS = frozenset({ProviderErrorCode.SYNTAX_ERROR})


@attrs.frozen
class QueryResult:
    """The rows one validated query returned."""

    query: ValidatedQuery
    rows: tuple[ResultRow, ...]


@attrs.frozen
class SourceFailure:
    """A source whose query failed with a classified provider error."""

    source_id: str
    code: ProviderErrorCode


@attrs.frozen
class ExecutionOutcome:
    """Successful results in query order, plus the classified failures."""

    results: tuple[QueryResult, ...]
    failures: tuple[SourceFailure, ...] = ()
    warnings: tuple[ResponseWarning, ...] = ()


@attrs.frozen
class _Slots:
    """The per-call semaphores one query must hold, besides the provider and instance ones."""

    invocation: asyncio.Semaphore
    source: asyncio.Semaphore


class Executor:
    """Runs validated queries against their sources' providers, bounded and resilient.

    Long-lived: one per runtime instance, shared by every tenant. It owns the per-source
    circuit breakers, the per-provider limiters and the instance-wide limiter, so their state
    spans invocations; the per-invocation and per-source limits come from each call's
    ``CapabilityLimits``. Source ids are unique only within a tenant, so a breaker belongs to
    a (tenant, source) pair: one tenant's failing source never opens another tenant's
    breaker for a source of the same id.

    With a ``broadcast``, breakers are shared with every instance on it (see
    ``esra.core._pipeline.breaker_sharing``): an opening here is announced, and
    ``follow_openings`` (run for the executor's lifetime) applies the other instances'.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        instance_concurrency: int = 64,
        provider_concurrency: int = 16,
        breaker_threshold: int = 5,
        breaker_reset_s: float = 30.0,
        broadcast: BreakerBroadcast | None = None,
    ) -> None:
        self._clock = clock
        self._instance = bounded_semaphore(instance_concurrency)
        self._provider_limiters = ProviderLimiters(provider_concurrency)
        self._breaker_threshold = breaker_threshold
        self._breaker_reset_s = breaker_reset_s
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self._sharing = (
            BreakerSharing(broadcast, reset_s=breaker_reset_s) if broadcast is not None else None
        )

    def breaker(self, source_id: str, *, tenant_id: str) -> CircuitBreaker:
        """Return the circuit breaker of ``tenant_id``'s ``source_id``, closed on first use.

        Its state changes are counted in ``esra.breaker.transitions`` and, with a broadcast,
        its openings announced to the other instances.
        """
        key = (tenant_id, source_id)
        breaker = self._breakers.get(key)
        if breaker is None:
            breaker = self._breakers[key] = CircuitBreaker(
                clock=self._clock,
                threshold=self._breaker_threshold,
                reset_s=self._breaker_reset_s,
                on_change=functools.partial(self._breaker_changed, tenant_id, source_id),
            )
        return breaker

    def _breaker_changed(self, tenant_id: str, source_id: str, state: BreakerState) -> None:
        count_breaker_transition(tenant_id, source_id, state)
        if self._sharing is not None:
            self._sharing.changed(tenant_id, source_id, state)

    async def follow_openings(self) -> None:
        """Apply the other instances' breaker openings until cancelled (a host runs it for
        its lifetime); returns at once without a broadcast."""
        if self._sharing is None:
            return
        await self._sharing.follow(
            lambda tenant_id, source_id: self.breaker(source_id, tenant_id=tenant_id)
        )

    async def execute(
        self,
        queries: Sequence[ValidatedQuery],
        *,
        providers: Mapping[str, SearchProvider],
        limits: CapabilityLimits,
        source_names: Mapping[str, str],
        systems: Mapping[str, str] | None = None,
    ) -> ExecutionOutcome:
        """Execute ``queries`` concurrently; a failing source degrades, never fails, the call.

        Returns successful results in query order, one ``SourceFailure`` and one
        ESRA_SOURCE_FAILED warning per failed source (its first failure's code).

        Each query is traced as one client span (``retrieval {source}``: the GenAI retrieval
        and database conventions, see ``esra.core._pipeline.query_spans``); ``systems``
        (source id → provider kind) names its ``db.system.name``.

        Raises:
            UnvalidatedQueryError: a query was not issued by the validator (before any
                provider is called).
            asyncio.CancelledError: the invocation was cancelled; in-flight work is cancelled.
        """
        checked = [ensure_validated(query) for query in queries]
        invocation = bounded_semaphore(limits.invocation_concurrency)
        source_slots = {
            source_id: _Slots(invocation, bounded_semaphore(limits.source_concurrency))
            for source_id in dict.fromkeys(q.source_id for q in checked)
        }
        runs = [
            self._run(
                query,
                providers.get(query.source_id),
                limits,
                source_slots,
                db_system((systems or {}).get(query.source_id, "")),
            )
            for query in checked
        ]
        if len(runs) == 1:
            # Nothing to run beside it: awaited here, without a task and a loop turn of its
            # own (a run returns its failure; only cancellation leaves it, as from a task).
            outcomes = [await runs[0]]
        else:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(run) for run in runs]
            outcomes = [task.result() for task in tasks]
        results: list[QueryResult] = []
        failed: dict[str, ProviderErrorCode] = {}
        for query, outcome in zip(checked, outcomes, strict=True):
            if isinstance(outcome, QueryResult):
                results.append(outcome)
            else:
                failed.setdefault(query.source_id, outcome)
        return ExecutionOutcome(
            results=tuple(results),
            failures=tuple(SourceFailure(s, code) for s, code in failed.items()),
            warnings=tuple(
                ResponseWarning(
                    WarningCode.ESRA_SOURCE_FAILED,
                    f"Source '{source_names.get(s, 'unnamed')}' failed: {code.value}.",
                )
                for s, code in failed.items()
            ),
        )

    async def _run(
        self,
        query: ValidatedQuery,
        provider: SearchProvider | None,
        limits: CapabilityLimits,
        source_slots: Mapping[str, _Slots],
        system: str,
    ) -> QueryResult | ProviderErrorCode:
        """Run one query with retry; return its result or its failure's code."""
        with query_span(query, system) as span:
            if provider is None:
                _log.error("no provider is registered for source %s", query.source_id)
                failed(span, ProviderErrorCode.UNKNOWN.value)
                return ProviderErrorCode.UNKNOWN
            attempt = functools.partial(
                self._attempt, query, provider, limits, source_slots[query.source_id], system
            )
            try:
                rows = await retry_transient(attempt, attempts=limits.retry_attempts)
            except ProviderError as exc:
                failed(span, exc.code.value)
                return ProviderErrorCode(exc.code)
            # The provider caps rows in the statement; capping again costs nothing.
            result = QueryResult(query=query, rows=tuple(rows)[: query.row_limit])
            span.set_attribute("esra.rows", len(result.rows))
            return result

    async def _attempt(
        self,
        query: ValidatedQuery,
        provider: SearchProvider,
        limits: CapabilityLimits,
        slots: _Slots,
        system: str,
    ) -> Sequence[ResultRow]:
        """One attempt: breaker admission, the four limiters, then the timed provider call."""
        breaker = self.breaker(query.source_id, tenant_id=query.mapping.tenant_id)
        breaker.admit()
        try:
            async with (
                slots.invocation,
                slots.source,
                self._provider_limiters.for_provider(provider),
                self._instance,
            ):
                with timed_attempt(query, system):
                    rows = await _timed_call(query, provider, limits.attempt_timeout_s)
        except ProviderError as exc:
            if exc.code in _QUERY_FAULTS:
                breaker.release()
            else:
                breaker.record_failure()
            raise
        except BaseException:
            breaker.release()
            raise
        breaker.record_success()
        return rows


async def _timed_call(
    query: ValidatedQuery, provider: SearchProvider, timeout_s: float
) -> Sequence[ResultRow]:
    """Call the provider under the attempt timeout; classify everything it raises."""
    try:
        async with asyncio.timeout(timeout_s):
            return await provider.execute(query, timeout_s=timeout_s)
    except TimeoutError:
        raise ProviderError(ProviderErrorCode.TIMEOUT) from None
    except ProviderError:
        raise
    except Exception as exc:
        # The text may hold driver detail, SQL or hosts: it goes to the log and nowhere else.
        _log.error("unclassified provider error for source %s", query.source_id, exc_info=exc)
        raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
