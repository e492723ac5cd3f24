"""The loop every ingestion worker process runs, and the totals it reports.

A worker runs turns until stopped: after a turn that claimed work it turns again at once
(the queue may hold more), after an idle one it waits ``idle_wait_s`` or until stopped — or,
draining (``until_idle``), returns. A stop takes effect between documents: the turn is given
the same event (``IngestionWorker.run_turn(stop=...)``), finishes the document in hand,
claims nothing more and returns, and no further turn starts — so a stop waits for one
document, never a batch, and no claimed document is left to its lease. Engines differ only
in what one turn is (which repositories, which store is ready), so they pass it in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import attrs

from esra.core._docstore.ingestion import TenantTurn

__all__ = ["TurnTotals", "run_turns"]


@attrs.define
class TurnTotals:
    """What a worker's turns did, summed; ``unreachable`` counts tenant turns a store ended."""

    turns: int = 0
    claimed: int = 0
    indexed: int = 0
    quarantined: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    unreachable: int = 0

    def add(self, turns: Sequence[TenantTurn]) -> None:
        """Count one worker turn: every tenant's part of it."""
        self.turns += 1
        for turn in turns:
            self.claimed += turn.claimed
            self.indexed += turn.indexed
            self.quarantined += turn.quarantined
            self.failed += turn.failed
            self.retried += turn.retried
            self.lost += turn.lost
            self.unreachable += int(turn.unreachable)


async def run_turns(
    turn: Callable[[], Awaitable[Sequence[TenantTurn]]],
    totals: TurnTotals,
    *,
    stop: asyncio.Event,
    until_idle: bool,
    idle_wait_s: float,
) -> None:
    """Run ``turn`` until ``stop`` is set (or, ``until_idle``, one claims nothing), adding
    each to ``totals``.

    ``stop`` is only looked at between turns here; ``turn`` must pass it on to
    ``IngestionWorker.run_turn(stop=...)`` for a stop to end the turn in progress.
    """
    while not stop.is_set():
        turns = await turn()
        totals.add(turns)
        if any(t.claimed for t in turns):
            continue
        if until_idle:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), idle_wait_s)
