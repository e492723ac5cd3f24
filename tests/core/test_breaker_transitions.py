"""A circuit breaker announces each real state change, and the executor counts them.

Only transitions are announced — closed → open, open → half_open when a trial is admitted,
half_open → closed or open — never a failure below the threshold, a late failure that
re-opens an open breaker, nor the clock alone passing the reset period.
"""

from __future__ import annotations

from esra.core._pipeline.execution import Executor
from esra.core._pipeline.resilience import BreakerState, CircuitBreaker
from esra.core._telemetry import TENANT_ID
from esra.core.testing import FakeClock
from tests._telemetry import Recorded, recording

OPEN, HALF_OPEN, CLOSED = BreakerState.OPEN, BreakerState.HALF_OPEN, BreakerState.CLOSED


def _watched(clock: FakeClock) -> tuple[CircuitBreaker, list[BreakerState]]:
    entered: list[BreakerState] = []
    breaker = CircuitBreaker(clock=clock, threshold=3, reset_s=30.0, on_change=entered.append)
    return breaker, entered


def _fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        breaker.admit()
        breaker.record_failure()


def test_failures_below_the_threshold_and_successes_while_closed_announce_nothing() -> None:
    """Closed stays closed: no announcement."""
    breaker, entered = _watched(FakeClock())
    _fail(breaker, 2)
    breaker.admit()
    breaker.record_success()
    _fail(breaker, 2)
    assert entered == []


def test_each_transition_is_announced_once_with_the_state_entered() -> None:
    """Open at the threshold; half-open only when the trial is admitted, not when the clock
    passes; a failed trial re-opens; a successful one closes."""
    clock = FakeClock()
    breaker, entered = _watched(clock)
    _fail(breaker, 3)
    assert entered == [OPEN]
    clock.advance(30)
    assert breaker.state is HALF_OPEN
    assert entered == [OPEN]
    breaker.admit()
    assert entered == [OPEN, HALF_OPEN]
    breaker.record_failure()
    assert entered == [OPEN, HALF_OPEN, OPEN]
    clock.advance(30)
    breaker.admit()
    breaker.record_success()
    assert entered == [OPEN, HALF_OPEN, OPEN, HALF_OPEN, CLOSED]


def test_reopening_an_open_breaker_and_retrying_a_released_trial_are_no_transitions() -> None:
    """Attempts admitted before the breaker opened may fail after it: it stays open. A
    cancelled trial, released, lets the next one in while still half-open."""
    clock = FakeClock()
    breaker, entered = _watched(clock)
    for _ in range(5):
        breaker.admit()  # five concurrent attempts admitted while closed
    for _ in range(5):
        breaker.record_failure()
    assert entered == [OPEN]
    clock.advance(30)
    breaker.admit()
    breaker.release()
    breaker.admit()
    assert entered == [OPEN, HALF_OPEN]


def test_a_late_success_closing_an_open_breaker_is_announced() -> None:
    """An attempt admitted before the breaker opened that then succeeds closes it."""
    breaker, entered = _watched(FakeClock())
    breaker.admit()
    _fail(breaker, 3)
    breaker.record_success()
    assert entered == [OPEN, CLOSED]


def _transitions(recorded: Recorded, source_id: str, state: str) -> int:
    wanted = {TENANT_ID: "tenant-t", "esra.source.id": source_id, "esra.breaker.state": state}
    return sum(
        int(point.value)
        for attributes, point in recorded.points("esra.breaker.transitions")
        if attributes == wanted
    )


def test_the_executor_counts_each_breakers_transitions_under_its_tenant_and_source() -> None:
    """The counter moves exactly on transitions, per state entered; another tenant's breaker
    for the same source id counts under its own tenant."""
    clock = FakeClock()
    executor = Executor(clock=clock, breaker_threshold=2, breaker_reset_s=10.0)
    breaker = executor.breaker("s-breaker", tenant_id="tenant-t")
    other = executor.breaker("s-breaker", tenant_id="tenant-u")
    states = ("open", "half_open", "closed")
    with recording() as recorded:
        before = {state: _transitions(recorded, "s-breaker", state) for state in states}

        def moved() -> dict[str, int]:
            return {s: _transitions(recorded, "s-breaker", s) - before[s] for s in states}

        _fail(breaker, 1)
        assert moved() == {"open": 0, "half_open": 0, "closed": 0}
        _fail(breaker, 1)
        assert moved() == {"open": 1, "half_open": 0, "closed": 0}
        _fail(other, 2)  # tenant-u's breaker: not tenant-t's count
        assert moved() == {"open": 1, "half_open": 0, "closed": 0}
        clock.advance(10)
        assert moved() == {"open": 1, "half_open": 0, "closed": 0}
        breaker.admit()
        assert moved() == {"open": 1, "half_open": 1, "closed": 0}
        breaker.record_success()
        assert moved() == {"open": 1, "half_open": 1, "closed": 1}
        breaker.admit()
        breaker.record_success()
        assert moved() == {"open": 1, "half_open": 1, "closed": 1}
