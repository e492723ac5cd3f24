"""Circuit breakers shared between runtime instances through a ``BreakerBroadcast``.

Each instance keeps counting its own failures (spec 000 §5's breaker is per source); what
is shared is the decision. When a breaker opens here, the opening is announced; when
another instance announces one, this instance's breaker of that source opens for what is
left of it. So a source failing behind one host stops being called from every host, and each
host still makes its own half-open trial once the reset time has passed.

Sharing only ever opens breakers sooner, so it fails open: an announcement that cannot be
delivered leaves the other instances to find the failures themselves, and a broadcast that
cannot be read leaves each instance on its own counts.

Whatever reads an announcement makes a breaker (and a metric series) for its pair, and the
broadcast may carry made-up pairs (anyone who can write to it can announce). So the pairs
followed are bounded: past
``max_followed_pairs`` distinct pairs, openings of a pair not yet followed are dropped (that
pair's breaker then opens on this instance's own counts only), and a flood of made-up ids
costs each instance a bounded number of breakers rather than all its memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from esra.core._pipeline.resilience import BreakerState, CircuitBreaker
from esra.core.ports import BreakerBroadcast, BreakerOpening

__all__ = ["DEFAULT_MAX_FOLLOWED_PAIRS", "BreakerSharing"]

# Well above the (tenant, source) pairs of a large deployment whose breakers open, and small
# enough that as many breakers cost an instance a few megabytes.
DEFAULT_MAX_FOLLOWED_PAIRS = 10_000

_log = logging.getLogger(__name__)


class BreakerSharing:
    """Announces this instance's openings through ``broadcast`` and applies the others'.

    Raises:
        ValueError: ``max_followed_pairs`` is not positive.
    """

    def __init__(
        self,
        broadcast: BreakerBroadcast,
        *,
        reset_s: float,
        max_followed_pairs: int = DEFAULT_MAX_FOLLOWED_PAIRS,
    ) -> None:
        if max_followed_pairs < 1:
            msg = "max_followed_pairs must be at least 1"
            raise ValueError(msg)
        self._broadcast = broadcast
        self._reset_s = reset_s
        self._max_followed_pairs = max_followed_pairs
        self._followed: set[tuple[str, str]] = set()
        self._dropping_logged = False
        # Announcements in flight: kept so they are not collected before they finish.
        self._announcing: set[asyncio.Task[None]] = set()
        # Set while an opening read from the broadcast is applied: it is not announced back.
        self._applying = False

    def changed(self, tenant_id: str, source_id: str, state: BreakerState) -> None:
        """A breaker of this instance entered ``state``: announce it if it opened here."""
        if state is not BreakerState.OPEN or self._applying:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: nothing to announce from (a synchronous test)
            return
        task = loop.create_task(self._broadcast.opened(tenant_id, source_id, self._reset_s))
        self._announcing.add(task)
        task.add_done_callback(self._announced)

    def _announced(self, task: asyncio.Task[None]) -> None:
        self._announcing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # The port promises not to raise; one that does still must not fail a search.
            _log.warning("breaker announcement failed: %s", type(task.exception()).__name__)

    def apply(self, breaker: CircuitBreaker, opening: BreakerOpening) -> None:
        """Open ``breaker`` for what is left of another instance's ``opening``."""
        self._applying = True
        try:
            breaker.open_for(min(opening.open_for_s, self._reset_s))
        finally:
            self._applying = False

    async def follow(self, breaker_of: Callable[[str, str], CircuitBreaker]) -> None:
        """Apply every opening the broadcast announces, until cancelled.

        ``breaker_of(tenant_id, source_id)`` is this instance's breaker of that source. Past
        ``max_followed_pairs`` pairs, openings of pairs not followed yet are dropped.
        """
        async for opening in self._broadcast.openings():
            pair = (opening.tenant_id, opening.source_id)
            if pair not in self._followed:
                if len(self._followed) >= self._max_followed_pairs:
                    self._dropped()
                    continue
                self._followed.add(pair)
            self.apply(breaker_of(*pair), opening)

    def _dropped(self) -> None:
        # Once per instance: a flood would otherwise log each of its messages.
        if not self._dropping_logged:
            self._dropping_logged = True
            _log.warning(
                "breaker openings of more than %d sources announced: openings of further "
                "sources are not applied on this instance",
                self._max_followed_pairs,
            )
