"""Breakers shared between instances: an opening on one executor opens the others'.

Two ``Executor``s on one ``InMemoryBreakerBroadcast`` stand for two hosts on one Redis. The
breaker that opened announces once; the follower opens its own for what is left, without
announcing it back; each half-opens and makes its own trial after the reset time; an opening
already in force is never shortened; and a follower that starts later still sees an opening
in force, but not one that has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from esra.core._pipeline.execution import Executor
from esra.core._pipeline.resilience import BreakerState, CircuitBreaker
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing import FakeClock, InMemoryBreakerBroadcast

TENANT = "tenant-a"
RESET_S = 30.0


def _executor(clock: FakeClock, broadcast: InMemoryBreakerBroadcast) -> Executor:
    return Executor(clock=clock, breaker_threshold=2, breaker_reset_s=RESET_S, broadcast=broadcast)


def _fail(breaker: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        breaker.admit()
        breaker.record_failure()


def _state(breaker: CircuitBreaker) -> BreakerState:
    """The state read afresh (a property mypy would otherwise keep narrowed)."""
    return breaker.state


@contextlib.asynccontextmanager
async def _following(executor: Executor) -> AsyncIterator[None]:
    task = asyncio.create_task(executor.follow_openings())
    await asyncio.sleep(0)  # let it subscribe
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_opening_on_one_instance_opens_the_other() -> None:
    clock = FakeClock()
    broadcast = InMemoryBreakerBroadcast(clock)
    first, second = _executor(clock, broadcast), _executor(clock, broadcast)
    async with _following(first), _following(second):
        _fail(first.breaker("s-1", tenant_id=TENANT), 2)
        await _settle()
        theirs = second.breaker("s-1", tenant_id=TENANT)
        assert theirs.state is BreakerState.OPEN
        with pytest.raises(ProviderError) as refused:
            theirs.admit()
        assert refused.value.code is ProviderErrorCode.CIRCUIT_OPEN
        # Announced once, by the instance that saw the failures; not echoed back.
        assert [(o.tenant_id, o.source_id) for o in broadcast.announced] == [(TENANT, "s-1")]
        # Another tenant's source of the same id is untouched.
        assert second.breaker("s-1", tenant_id="tenant-b").state is BreakerState.CLOSED


async def test_each_instance_makes_its_own_trial_after_the_reset_time() -> None:
    clock = FakeClock()
    broadcast = InMemoryBreakerBroadcast(clock)
    first, second = _executor(clock, broadcast), _executor(clock, broadcast)
    async with _following(second):
        _fail(first.breaker("s-1", tenant_id=TENANT), 2)
        await _settle()
        clock.advance(RESET_S)
        theirs = second.breaker("s-1", tenant_id=TENANT)
        assert theirs.state is BreakerState.HALF_OPEN
        theirs.admit()  # its own trial
        theirs.record_success()
        assert _state(theirs) is BreakerState.CLOSED


def test_an_opening_in_force_is_never_shortened_nor_lengthened_past_the_reset() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, threshold=2, reset_s=RESET_S)
    _fail(breaker, 2)  # open for the full 30 s
    breaker.open_for(5)
    clock.advance(10)
    assert breaker.state is BreakerState.OPEN  # the shorter remote opening changed nothing
    fresh = CircuitBreaker(clock=clock, threshold=2, reset_s=RESET_S)
    fresh.open_for(3600)  # a skewed clock elsewhere: at most reset_s
    clock.advance(RESET_S)
    assert fresh.state is BreakerState.HALF_OPEN


async def test_a_late_follower_sees_openings_in_force_only() -> None:
    clock = FakeClock()
    broadcast = InMemoryBreakerBroadcast(clock)
    await broadcast.opened(TENANT, "s-old", 5)
    await broadcast.opened(TENANT, "s-new", RESET_S)
    clock.advance(10)
    late = _executor(clock, broadcast)
    async with _following(late):
        await _settle()
        assert late.breaker("s-new", tenant_id=TENANT).state is BreakerState.OPEN
        assert late.breaker("s-old", tenant_id=TENANT).state is BreakerState.CLOSED


async def test_an_executor_without_a_broadcast_follows_nothing() -> None:
    executor = Executor(clock=FakeClock())
    await asyncio.wait_for(executor.follow_openings(), timeout=5)
