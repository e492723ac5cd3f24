"""The worker loop: turn again while work is claimed, drain or wait when idle, stop between
turns."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from esra.core._docstore.ingestion import TenantTurn
from esra.core._docstore.worker_loop import TurnTotals, run_turns

Turn = Callable[[], Awaitable[Sequence[TenantTurn]]]


def _scripted(
    *claims: int, stop: asyncio.Event | None = None, stop_after: int = 0
) -> tuple[Turn, list[int]]:
    remaining = list(claims)
    calls: list[int] = []

    async def turn() -> Sequence[TenantTurn]:
        calls.append(1)
        if stop is not None and len(calls) == stop_after:
            stop.set()
        claimed = remaining.pop(0) if remaining else 0
        return [
            TenantTurn(tenant_id="a", claimed=claimed, indexed=claimed),
            TenantTurn(tenant_id="b", unreachable=claimed == 0),
        ]

    return turn, calls


async def test_draining_turns_again_while_work_is_claimed_then_returns() -> None:
    """Claims 3, 2, then nothing: three turns, totals summed over both tenants."""
    turn, calls = _scripted(3, 2)
    totals = TurnTotals()
    await run_turns(turn, totals, stop=asyncio.Event(), until_idle=True, idle_wait_s=60)
    assert len(calls) == 3
    assert (totals.turns, totals.claimed, totals.indexed, totals.unreachable) == (3, 5, 5, 1)


async def test_a_stop_takes_effect_after_the_current_turn() -> None:
    """Set during the second turn: that turn is finished and counted, no third one runs."""
    stop = asyncio.Event()
    turn, calls = _scripted(1, 1, 1, 1, stop=stop, stop_after=2)
    totals = TurnTotals()
    await run_turns(turn, totals, stop=stop, until_idle=False, idle_wait_s=60)
    assert (len(calls), totals.claimed) == (2, 2)


async def test_an_idle_worker_waits_and_wakes_for_a_stop() -> None:
    """Not draining: an idle turn waits; a stop during the wait ends the loop at once."""
    stop = asyncio.Event()
    turn, calls = _scripted()
    running = asyncio.create_task(
        run_turns(turn, TurnTotals(), stop=stop, until_idle=False, idle_wait_s=3600)
    )
    while not calls:
        await asyncio.sleep(0)
    stop.set()
    async with asyncio.timeout(30):  # a guard against hanging, not a measurement
        await running
    assert len(calls) == 1
