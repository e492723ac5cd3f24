"""SlotPool: closing the pool releases whoever waits for a slot, at once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from esra.sql import PoolTimeoutError, SlotPool

# Far longer than any of these tests runs: a waiter still parked after JOIN_S was not woken.
WAIT_S = 120.0
JOIN_S = 30.0


class _Connection:
    def close(self) -> None:
        pass


def _pool() -> SlotPool[_Connection]:
    return SlotPool(_Connection, size=1, thread_name="esra-test-slot")


def test_closing_the_pool_wakes_every_thread_waiting_for_a_slot() -> None:
    pool = _pool()
    held = pool.acquire(1)
    outcomes: list[BaseException | None] = []

    def wait() -> None:
        try:
            pool.acquire(WAIT_S)
        except PoolTimeoutError as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    pool.close()
    for waiter in waiters:
        waiter.join(JOIN_S)
    assert not any(waiter.is_alive() for waiter in waiters)
    assert len(outcomes) == 3
    assert all(isinstance(outcome, PoolTimeoutError) for outcome in outcomes)
    pool.release(held)  # closed now: the slot closes instead of going back


def test_a_slot_released_before_the_close_still_reaches_a_waiter() -> None:
    pool = _pool()
    held = pool.acquire(1)
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(WAIT_S)))
    waiter.start()
    pool.release(held)
    waiter.join(JOIN_S)
    assert got == [held]
    pool.close()


async def test_an_abandoned_async_wait_does_not_hold_up_the_loops_shutdown() -> None:
    """A cancelled acquire_async leaves a thread of the loop's default executor waiting; once
    the pool closes, that thread ends, so the loop can shut its executor down."""
    pool = _pool()
    held = pool.acquire(1)
    task = asyncio.create_task(pool.acquire_async(WAIT_S))
    await asyncio.sleep(0.05)  # the wait is now parked on an executor thread
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pool.close()
    await asyncio.wait_for(asyncio.get_running_loop().shutdown_default_executor(), JOIN_S)
    pool.release(held)


def test_a_closed_pool_opens_no_slot_even_with_room_left() -> None:
    """After close, an acquire with room left in the pool is refused at once instead of
    opening a connection nobody will close until it is released."""
    pool = _pool()
    pool.close()
    assert pool.try_acquire() is None
    with pytest.raises(PoolTimeoutError):
        pool.acquire(WAIT_S)
