"""Tests for the circuit breaker, the limiter helpers and the transient-only retry policy."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
import stamina

from esra.core._pipeline.resilience import (
    BreakerState,
    CircuitBreaker,
    ProviderLimiters,
    bounded_semaphore,
    is_retryable,
    retry_transient,
)
from esra.core.codes import RETRYABLE_PROVIDER_ERRORS, ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing import FakeClock


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    # Backoff off; the attempts each test asks for still apply (capped, not replaced).
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _breaker(clock: FakeClock, threshold: int = 3, reset_s: float = 30.0) -> CircuitBreaker:
    return CircuitBreaker(clock=clock, threshold=threshold, reset_s=reset_s)


def _state(breaker: CircuitBreaker) -> BreakerState:
    # A call, not an attribute: mypy would otherwise pin the state after the first assert.
    return breaker.state


def _open(breaker: CircuitBreaker, failures: int) -> None:
    for _ in range(failures):
        breaker.admit()
        breaker.record_failure()


# --- circuit breaker ----------------------------------------------------------------------


def test_breaker_stays_closed_below_threshold() -> None:
    """Fewer consecutive failures than the threshold leave the breaker closed."""
    breaker = _breaker(FakeClock())
    _open(breaker, 2)
    assert _state(breaker) is BreakerState.CLOSED
    assert breaker.consecutive_failures == 2
    breaker.admit()


def test_success_resets_the_consecutive_count() -> None:
    """A success between failures resets the count: only consecutive failures open it."""
    breaker = _breaker(FakeClock())
    _open(breaker, 2)
    breaker.record_success()
    _open(breaker, 2)
    assert _state(breaker) is BreakerState.CLOSED


def test_breaker_opens_at_threshold_and_refuses() -> None:
    """At the threshold the breaker opens and admit raises CIRCUIT_OPEN."""
    breaker = _breaker(FakeClock())
    _open(breaker, 3)
    assert _state(breaker) is BreakerState.OPEN
    with pytest.raises(ProviderError) as raised:
        breaker.admit()
    assert raised.value.code is ProviderErrorCode.CIRCUIT_OPEN


def test_breaker_half_opens_only_after_the_reset_period() -> None:
    """The breaker stays open until reset_s has passed on the clock, then half-opens."""
    clock = FakeClock()
    breaker = _breaker(clock, reset_s=30.0)
    _open(breaker, 3)
    clock.advance(29.9)
    assert _state(breaker) is BreakerState.OPEN
    clock.advance(0.1)
    assert _state(breaker) is BreakerState.HALF_OPEN


def test_half_open_admits_exactly_one_trial() -> None:
    """Half-open lets one trial through; concurrent callers are refused until it ends."""
    clock = FakeClock()
    breaker = _breaker(clock)
    _open(breaker, 3)
    clock.advance(30)
    breaker.admit()
    with pytest.raises(ProviderError):
        breaker.admit()


def test_trial_success_closes() -> None:
    """A successful trial closes the breaker and clears the failure count."""
    clock = FakeClock()
    breaker = _breaker(clock)
    _open(breaker, 3)
    clock.advance(30)
    breaker.admit()
    breaker.record_success()
    assert _state(breaker) is BreakerState.CLOSED
    assert breaker.consecutive_failures == 0


def test_trial_failure_reopens_for_a_fresh_period() -> None:
    """A failed trial re-opens the breaker, timed from the failure."""
    clock = FakeClock()
    breaker = _breaker(clock)
    _open(breaker, 3)
    clock.advance(30)
    breaker.admit()
    breaker.record_failure()
    assert _state(breaker) is BreakerState.OPEN
    clock.advance(29)
    assert _state(breaker) is BreakerState.OPEN
    clock.advance(1)
    assert _state(breaker) is BreakerState.HALF_OPEN


def test_released_trial_lets_another_caller_try() -> None:
    """A cancelled trial proves nothing; releasing it admits the next caller."""
    clock = FakeClock()
    breaker = _breaker(clock)
    _open(breaker, 3)
    clock.advance(30)
    breaker.admit()
    breaker.release()
    breaker.admit()
    assert _state(breaker) is BreakerState.HALF_OPEN


# --- limiters -----------------------------------------------------------------------------


def test_bounded_semaphore_admits_at_least_one() -> None:
    """A configured limit of zero still admits one holder rather than deadlocking."""
    assert bounded_semaphore(0)._value == 1
    assert bounded_semaphore(5)._value == 5


class _Provider:
    pass


class _Unhashable:
    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]


def test_provider_limiters_share_by_identity() -> None:
    """The same provider object always gets the same semaphore; another object its own."""
    limiters = ProviderLimiters(4)
    first, second = _Provider(), _Provider()
    assert limiters.for_provider(first) is limiters.for_provider(first)
    assert limiters.for_provider(first) is not limiters.for_provider(second)
    assert limiters.for_provider(first)._value == 4


def test_provider_limiters_forget_collected_providers() -> None:
    """A provider that is garbage-collected loses its entry, so reloads do not leak."""
    limiters = ProviderLimiters(2)
    provider: _Provider | None = _Provider()
    limiters.for_provider(provider)
    assert len(limiters) == 1
    provider = None
    gc.collect()
    assert len(limiters) == 0


def test_provider_limiters_accept_unhashable_unweakrefable_providers() -> None:
    """A provider that is neither hashable nor weakly referenceable still gets a semaphore."""
    limiters = ProviderLimiters(2)
    provider = _Unhashable()
    assert limiters.for_provider(provider) is limiters.for_provider(provider)


# --- retry policy -------------------------------------------------------------------------


@pytest.mark.parametrize("code", list(ProviderErrorCode))
def test_only_the_three_transient_codes_are_retryable(code: ProviderErrorCode) -> None:
    """CONNECTION_REFUSED, RESOURCE_EXHAUSTED and TIMEOUT retry; nothing else does."""
    expected = code in {
        ProviderErrorCode.CONNECTION_REFUSED,
        ProviderErrorCode.RESOURCE_EXHAUSTED,
        ProviderErrorCode.TIMEOUT,
    }
    assert is_retryable(ProviderError(code)) is expected
    assert (code in RETRYABLE_PROVIDER_ERRORS) is expected


def test_unclassified_errors_are_not_retryable() -> None:
    """An exception that is not a ProviderError is never retried."""
    assert not is_retryable(RuntimeError("boom"))
    assert not is_retryable(TimeoutError())


class _Flaky:
    """Fails with ``code`` ``failures`` times, then returns ``"ok"``; counts calls."""

    def __init__(self, code: ProviderErrorCode, failures: int) -> None:
        self.code = code
        self.failures = failures
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise ProviderError(self.code)
        return "ok"


async def test_retry_recovers_from_transient_failures() -> None:
    """Two transient failures then success: three calls, the success returned."""
    flaky = _Flaky(ProviderErrorCode.CONNECTION_REFUSED, 2)
    assert await retry_transient(flaky, attempts=3) == "ok"
    assert flaky.calls == 3


async def test_retry_gives_up_after_attempts() -> None:
    """A persistent transient failure is attempted exactly ``attempts`` times, then raised."""
    flaky = _Flaky(ProviderErrorCode.RESOURCE_EXHAUSTED, 99)
    with pytest.raises(ProviderError) as raised:
        await retry_transient(flaky, attempts=4)
    assert raised.value.code is ProviderErrorCode.RESOURCE_EXHAUSTED
    assert flaky.calls == 4


@pytest.mark.parametrize(
    "code", [c for c in ProviderErrorCode if c not in RETRYABLE_PROVIDER_ERRORS]
)
async def test_non_transient_failures_are_not_retried(code: ProviderErrorCode) -> None:
    """CIRCUIT_OPEN, AUTH_FAILED and every other non-transient code: exactly one call."""
    flaky = _Flaky(code, 99)
    with pytest.raises(ProviderError):
        await retry_transient(flaky, attempts=5)
    assert flaky.calls == 1


async def test_zero_attempts_still_tries_once() -> None:
    """A misconfigured attempt count of zero still makes one attempt."""
    flaky = _Flaky(ProviderErrorCode.TIMEOUT, 0)
    assert await retry_transient(flaky, attempts=0) == "ok"
    assert flaky.calls == 1


async def test_cancellation_is_not_retried() -> None:
    """CancelledError propagates out of the retry loop after one call."""
    calls = 0

    async def cancelled() -> str:
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await retry_transient(cancelled, attempts=5)
    assert calls == 1
