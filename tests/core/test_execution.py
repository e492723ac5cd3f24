"""Tests for the executor (stage 5): bounds, retry, breaker, timeouts, failure isolation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import stamina

from esra.core._config.source import SourceHealth
from esra.core._pipeline.execution import Executor, QueryResult, SourceFailure
from esra.core._pipeline.resilience import BreakerState
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._response import ResponseWarning
from esra.core.codes import ProviderErrorCode, WarningCode
from esra.core.config import CapabilityLimits
from esra.core.exceptions import UnvalidatedQueryError
from esra.core.ports import ProviderCapabilities, SearchProvider
from esra.core.testing import FakeClock, InMemorySearchProvider
from tests.core._validation_fixtures import ALL_CAPS, issue, keyword

NAMES = {"s-1": "Contracts", "s-2": "Tickets"}
ROWS = {
    "m-1": [{"col_id": 1, "col_title": "alpha", "col_body": "alpha alpha"}],
    "m-s-2": [{"col_id": 7, "col_title": "alpha ticket", "col_body": "alpha"}],
}
SECRET = "password=hunter2 host=db.internal.example"


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    # No sleeping between retries; each test's retry_attempts still decides the count.
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _queries(s1: int = 1, s2: int = 0) -> list[ValidatedQuery]:
    planned = [keyword(limit=5)] * s1 + [keyword("s-2", limit=5)] * s2
    queries = issue(planned)
    assert len(queries) == s1 + s2
    return queries


def _limits(**kw: Any) -> CapabilityLimits:
    values: dict[str, Any] = {"retry_attempts": 1, "attempt_timeout_s": 5.0}
    values.update(kw)
    return CapabilityLimits(**values)


class GatedProvider:
    """Holds every execution at a gate and records the most executions in flight at once."""

    def __init__(self, counter: InFlight | None = None) -> None:
        self.gate = asyncio.Event()
        self.counter = counter or InFlight()
        self.calls = 0
        self.cancelled = 0

    @property
    def capabilities(self) -> ProviderCapabilities:
        return ALL_CAPS

    async def health(self) -> SourceHealth:
        return SourceHealth.HEALTHY

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.calls += 1
        self.counter.enter()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.counter.leave()
        return [ResultRow(key=query.query_id, score=1.0)]


class InFlight:
    """Counts executions in flight, possibly across several providers."""

    def __init__(self) -> None:
        self.now = 0
        self.max = 0

    def enter(self) -> None:
        self.now += 1
        self.max = max(self.max, self.now)

    def leave(self) -> None:
        self.now -= 1


class ExplodingProvider(GatedProvider):
    """Raises an unclassified exception whose text must never leave the core."""

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.calls += 1
        raise RuntimeError(SECRET)


class RecordingProvider(InMemorySearchProvider):
    """An in-memory provider that remembers the timeout it was given."""

    timeouts: list[float]

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.timeouts = [*getattr(self, "timeouts", []), timeout_s]
        return await super().execute(query, timeout_s=timeout_s)


async def _settle() -> None:
    """Let every runnable task run until all are blocked (no wall clock involved)."""
    for _ in range(50):
        await asyncio.sleep(0)


def _failing(code: ProviderErrorCode, times: int | None = None) -> InMemorySearchProvider:
    provider = InMemorySearchProvider(ROWS)
    provider.fail_with = code
    provider.fail_times = times
    return provider


async def _run(
    executor: Executor,
    queries: Sequence[ValidatedQuery],
    providers: dict[str, SearchProvider],
    limits: CapabilityLimits | None = None,
) -> tuple[tuple[QueryResult, ...], tuple[SourceFailure, ...], tuple[ResponseWarning, ...]]:
    outcome = await executor.execute(
        queries, providers=providers, limits=limits or _limits(), source_names=NAMES
    )
    return outcome.results, outcome.failures, outcome.warnings


# --- success and ordering -----------------------------------------------------------------


async def test_results_come_back_in_query_order() -> None:
    """Every successful query yields a QueryResult, in the order the queries were given."""
    queries = _queries(s1=2, s2=1)
    provider = InMemorySearchProvider(ROWS)
    outcome = await Executor(clock=FakeClock()).execute(
        queries, providers={"s-1": provider, "s-2": provider}, limits=_limits(), source_names=NAMES
    )
    assert [r.query for r in outcome.results] == queries
    assert [r.rows[0].key for r in outcome.results] == ["1", "1", "7"]
    assert (outcome.failures, outcome.warnings) == ((), ())


async def test_provider_gets_the_attempt_timeout() -> None:
    """The attempt timeout is passed to the provider for a server-side statement timeout."""
    provider = RecordingProvider(ROWS)
    await _run(
        Executor(clock=FakeClock()), _queries(), {"s-1": provider}, _limits(attempt_timeout_s=2.5)
    )
    assert provider.timeouts == [2.5]


async def test_rows_are_capped_at_the_row_limit() -> None:
    """Rows beyond the query's row limit are never passed on, even if a provider returns them."""
    many = {"m-1": [{"col_id": i, "col_title": "alpha", "col_body": "alpha"} for i in range(9)]}

    class Careless(InMemorySearchProvider):
        async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
            rows = await super().execute(query, timeout_s=timeout_s)
            return [*rows, *rows]

    (query,) = _queries()
    outcome = await Executor(clock=FakeClock()).execute(
        [query], providers={"s-1": Careless(many)}, limits=_limits(), source_names=NAMES
    )
    assert len(outcome.results[0].rows) == query.row_limit == 5


async def test_forged_query_is_refused_before_any_provider_call() -> None:
    """A forged query stops the whole call with UnvalidatedQueryError; nothing is executed."""
    provider = InMemorySearchProvider(ROWS)
    forged = ValidatedQuery.__new__(ValidatedQuery)
    with pytest.raises(UnvalidatedQueryError):
        await Executor(clock=FakeClock()).execute(
            [*_queries(), forged], providers={"s-1": provider}, limits=_limits(), source_names=NAMES
        )
    assert provider.executed == []


# --- retry --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        ProviderErrorCode.CONNECTION_REFUSED,
        ProviderErrorCode.RESOURCE_EXHAUSTED,
        ProviderErrorCode.TIMEOUT,
    ],
)
async def test_transient_errors_are_retried(code: ProviderErrorCode) -> None:
    """A transient code failing twice then succeeding takes three provider calls and succeeds."""
    provider = _failing(code, times=2)
    results, failures, _ = await _run(
        Executor(clock=FakeClock()), _queries(), {"s-1": provider}, _limits(retry_attempts=3)
    )
    assert len(provider.executed) == 3
    assert len(results) == 1
    assert failures == ()


async def test_retries_stop_at_retry_attempts() -> None:
    """A persistent transient failure is tried retry_attempts times, then reported."""
    provider = _failing(ProviderErrorCode.CONNECTION_REFUSED)
    results, failures, _ = await _run(
        Executor(clock=FakeClock()), _queries(), {"s-1": provider}, _limits(retry_attempts=4)
    )
    assert len(provider.executed) == 4
    assert results == ()
    assert failures == (SourceFailure("s-1", ProviderErrorCode.CONNECTION_REFUSED),)


@pytest.mark.parametrize(
    "code",
    [
        ProviderErrorCode.AUTH_FAILED,
        ProviderErrorCode.CIRCUIT_OPEN,
        ProviderErrorCode.SYNTAX_ERROR,
        ProviderErrorCode.PERMISSION_DENIED,
        ProviderErrorCode.UNKNOWN,
        ProviderErrorCode.CANCELLED,
    ],
)
async def test_non_transient_errors_are_not_retried(code: ProviderErrorCode) -> None:
    """Non-transient codes (CIRCUIT_OPEN included) get exactly one provider call."""
    provider = _failing(code)
    _, failures, _ = await _run(
        Executor(clock=FakeClock()), _queries(), {"s-1": provider}, _limits(retry_attempts=5)
    )
    assert len(provider.executed) == 1
    assert failures == (SourceFailure("s-1", code),)


# --- circuit breaker ----------------------------------------------------------------------


async def test_breaker_opens_after_threshold_and_skips_the_provider() -> None:
    """After N consecutive failures the breaker opens: CIRCUIT_OPEN, provider not called."""
    clock = FakeClock()
    executor = Executor(clock=clock, breaker_threshold=3)
    provider = _failing(ProviderErrorCode.AUTH_FAILED)
    for _ in range(3):
        await _run(executor, _queries(), {"s-1": provider})
    assert executor.breaker("s-1", tenant_id="tenant-a").state is BreakerState.OPEN
    _, failures, warnings = await _run(executor, _queries(), {"s-1": provider})
    assert len(provider.executed) == 3
    assert failures == (SourceFailure("s-1", ProviderErrorCode.CIRCUIT_OPEN),)
    assert "CIRCUIT_OPEN" in warnings[0].message


async def test_a_query_the_engine_refuses_as_built_does_not_count_against_the_source() -> None:
    """``SYNTAX_ERROR`` is the query's own fault (content the engine cannot run as built, a
    value too long for its parameter): the source answered or was never asked. Counted, a
    caller steering the planner into such queries opened the source's breaker for every
    caller of the tenant (found by a hostile review on SQL Server)."""
    executor = Executor(clock=FakeClock(), breaker_threshold=2)
    refused = _failing(ProviderErrorCode.SYNTAX_ERROR)
    for _ in range(5):
        _, failures, _ = await _run(executor, _queries(), {"s-1": refused})
        assert failures == (SourceFailure("s-1", ProviderErrorCode.SYNTAX_ERROR),)
    assert executor.breaker("s-1", tenant_id="tenant-a").state is BreakerState.CLOSED
    assert len(refused.executed) == 5


async def test_open_breaker_ends_the_retries() -> None:
    """Retries stop once the breaker opens; CIRCUIT_OPEN itself is never retried."""
    executor = Executor(clock=FakeClock(), breaker_threshold=2)
    provider = _failing(ProviderErrorCode.CONNECTION_REFUSED)
    _, failures, _ = await _run(executor, _queries(), {"s-1": provider}, _limits(retry_attempts=5))
    assert len(provider.executed) == 2
    assert failures == (SourceFailure("s-1", ProviderErrorCode.CIRCUIT_OPEN),)


async def test_breaker_half_opens_after_reset_and_closes_on_success() -> None:
    """On the fake clock: open, then after breaker_reset_s one trial runs and closes it."""
    clock = FakeClock()
    executor = Executor(clock=clock, breaker_threshold=2, breaker_reset_s=30.0)
    provider = _failing(ProviderErrorCode.AUTH_FAILED, times=2)
    for _ in range(2):
        await _run(executor, _queries(), {"s-1": provider})
    clock.advance(29.0)
    _, failures, _ = await _run(executor, _queries(), {"s-1": provider})
    assert failures == (SourceFailure("s-1", ProviderErrorCode.CIRCUIT_OPEN),)
    clock.advance(1.0)
    assert executor.breaker("s-1", tenant_id="tenant-a").state is BreakerState.HALF_OPEN
    results, failures, _ = await _run(executor, _queries(), {"s-1": provider})
    assert failures == ()
    assert len(results) == 1
    assert executor.breaker("s-1", tenant_id="tenant-a").state is BreakerState.CLOSED
    assert len(provider.executed) == 3


async def test_breakers_are_per_source() -> None:
    """One source's open breaker does not stop another source."""
    executor = Executor(clock=FakeClock(), breaker_threshold=1)
    bad, good = _failing(ProviderErrorCode.AUTH_FAILED), InMemorySearchProvider(ROWS)
    await _run(executor, _queries(), {"s-1": bad})
    results, failures, _ = await _run(executor, _queries(s1=1, s2=1), {"s-1": bad, "s-2": good})
    assert failures == (SourceFailure("s-1", ProviderErrorCode.CIRCUIT_OPEN),)
    assert [r.query.source_id for r in results] == ["s-2"]


# --- timeouts and unexpected errors -------------------------------------------------------


async def test_attempt_timeout_becomes_timeout_and_breaker_failure() -> None:
    """A provider that never answers times out per attempt: TIMEOUT, retried, counted."""
    provider = GatedProvider()  # its gate is never opened
    executor = Executor(clock=FakeClock(), breaker_threshold=10)
    _, failures, _ = await _run(
        executor, _queries(), {"s-1": provider}, _limits(attempt_timeout_s=0.001, retry_attempts=2)
    )
    assert failures == (SourceFailure("s-1", ProviderErrorCode.TIMEOUT),)
    assert provider.calls == 2
    assert provider.cancelled == 2
    assert executor.breaker("s-1", tenant_id="tenant-a").consecutive_failures == 2


async def test_unexpected_exception_becomes_unknown_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unclassified exception is UNKNOWN, not retried; its text reaches the log only."""
    provider = ExplodingProvider()
    executor = Executor(clock=FakeClock())
    with caplog.at_level(logging.ERROR, logger="esra.core._pipeline.execution"):
        _, failures, warnings = await _run(
            executor, _queries(), {"s-1": provider}, _limits(retry_attempts=3)
        )
    assert failures == (SourceFailure("s-1", ProviderErrorCode.UNKNOWN),)
    assert provider.calls == 1
    assert all("hunter2" not in w.message for w in warnings)
    assert executor.breaker("s-1", tenant_id="tenant-a").consecutive_failures == 1
    assert any(r.exc_info and SECRET in str(r.exc_info[1]) for r in caplog.records)


async def test_missing_provider_is_unknown_for_that_source_only() -> None:
    """A source without a provider fails UNKNOWN; the others still run."""
    results, failures, _ = await _run(
        Executor(clock=FakeClock()), _queries(s1=1, s2=1), {"s-2": InMemorySearchProvider(ROWS)}
    )
    assert failures == (SourceFailure("s-1", ProviderErrorCode.UNKNOWN),)
    assert [r.query.source_id for r in results] == ["s-2"]


async def test_one_failing_source_degrades_not_fails() -> None:
    """One failing source: ESRA_SOURCE_FAILED naming it, while the other returns results."""
    outcome = await Executor(clock=FakeClock()).execute(
        _queries(s1=2, s2=1),
        providers={
            "s-1": _failing(ProviderErrorCode.PERMISSION_DENIED),
            "s-2": InMemorySearchProvider(ROWS),
        },
        limits=_limits(),
        source_names=NAMES,
    )
    assert [r.query.source_id for r in outcome.results] == ["s-2"]
    assert outcome.failures == (SourceFailure("s-1", ProviderErrorCode.PERMISSION_DENIED),)
    (warning,) = outcome.warnings
    assert warning.code is WarningCode.ESRA_SOURCE_FAILED
    assert "Contracts" in warning.message
    assert "PERMISSION_DENIED" in warning.message
    assert "s-1" not in warning.message


# --- concurrency bounds (counted, not timed) ----------------------------------------------


async def _max_in_flight(
    executor: Executor,
    calls: list[tuple[list[ValidatedQuery], dict[str, SearchProvider]]],
    limits: CapabilityLimits,
    providers: Sequence[GatedProvider],
    counter: InFlight,
) -> int:
    """Start every call, let them pile up at the gates, record the peak, then release."""
    tasks = [
        asyncio.create_task(executor.execute(q, providers=p, limits=limits, source_names=NAMES))
        for q, p in calls
    ]
    await _settle()
    peak = counter.now
    for provider in providers:
        provider.gate.set()
    outcomes = await asyncio.gather(*tasks)
    assert counter.max == peak
    assert all(not o.failures for o in outcomes)
    assert sum(len(o.results) for o in outcomes) == sum(len(q) for q, _ in calls)
    return peak


async def test_invocation_concurrency_bound() -> None:
    """No more than invocation_concurrency queries of one call run at once."""
    counter = InFlight()
    p1, p2 = GatedProvider(counter), GatedProvider(counter)
    limits = _limits(invocation_concurrency=3, source_concurrency=10)
    peak = await _max_in_flight(
        Executor(clock=FakeClock()),
        [(_queries(s1=3, s2=3), {"s-1": p1, "s-2": p2})],
        limits,
        [p1, p2],
        counter,
    )
    assert peak == 3


async def test_source_concurrency_bound() -> None:
    """No more than source_concurrency queries run against one source at once."""
    p1, p2 = GatedProvider(), GatedProvider()
    limits = _limits(invocation_concurrency=10, source_concurrency=2)
    queries = _queries(s1=3, s2=3)
    tasks = asyncio.create_task(
        Executor(clock=FakeClock()).execute(
            queries, providers={"s-1": p1, "s-2": p2}, limits=limits, source_names=NAMES
        )
    )
    await _settle()
    assert (p1.counter.now, p2.counter.now) == (2, 2)
    p1.gate.set()
    p2.gate.set()
    outcome = await tasks
    assert (p1.counter.max, p2.counter.max) == (2, 2)
    assert len(outcome.results) == 6


async def test_provider_concurrency_bound() -> None:
    """One provider object serving two sources admits at most provider_concurrency at once."""
    counter = InFlight()
    shared = GatedProvider(counter)
    limits = _limits(invocation_concurrency=10, source_concurrency=10)
    peak = await _max_in_flight(
        Executor(clock=FakeClock(), provider_concurrency=2),
        [(_queries(s1=3, s2=3), {"s-1": shared, "s-2": shared})],
        limits,
        [shared],
        counter,
    )
    assert peak == 2


async def test_instance_concurrency_bound_spans_invocations() -> None:
    """Concurrent invocations on one executor together stay within instance_concurrency."""
    counter = InFlight()
    providers = [GatedProvider(counter) for _ in range(4)]
    limits = _limits(invocation_concurrency=10, source_concurrency=10)
    calls: list[tuple[list[ValidatedQuery], dict[str, SearchProvider]]] = [
        (_queries(s1=2, s2=2), {"s-1": providers[i], "s-2": providers[i + 1]}) for i in (0, 2)
    ]
    peak = await _max_in_flight(
        Executor(clock=FakeClock(), instance_concurrency=3), calls, limits, providers, counter
    )
    assert peak == 3


# --- cancellation -------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2])
async def test_cancellation_propagates_and_is_not_a_failure(count: int) -> None:
    """Cancelling the call cancels in-flight provider calls, raises, and trips nothing —
    a lone query (run without a task of its own) as much as several."""
    provider = GatedProvider()
    executor = Executor(clock=FakeClock(), breaker_threshold=1)
    task = asyncio.create_task(
        executor.execute(
            _queries(s1=count), providers={"s-1": provider}, limits=_limits(), source_names=NAMES
        )
    )
    await _settle()
    assert provider.counter.now == count
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.cancelled == count
    assert executor.breaker("s-1", tenant_id="tenant-a").state is BreakerState.CLOSED
    assert executor.breaker("s-1", tenant_id="tenant-a").consecutive_failures == 0


async def test_provider_error_keeps_its_code() -> None:
    """A ProviderError raised by a provider keeps its own code (no re-classification)."""
    provider = _failing(ProviderErrorCode.TEXT_INDEX_UNAVAILABLE)
    _, failures, _ = await _run(Executor(clock=FakeClock()), _queries(), {"s-1": provider})
    assert failures == (SourceFailure("s-1", ProviderErrorCode.TEXT_INDEX_UNAVAILABLE),)
