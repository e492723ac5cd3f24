"""InMemoryBreakerBroadcast: breaker openings shared by the executors of one process.

What a shared broadcast (``esra.redis.RedisBreakerBroadcast``) does across hosts, for tests
of several "instances" in one process: each ``Executor`` given the same broadcast sees the
others' openings. Openings are kept with their end on the injected clock, so one that has
run out is not yielded to an instance that starts following later.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from esra.core.ports import BreakerOpening
from esra.core.testing._fakes import FakeClock

__all__ = ["InMemoryBreakerBroadcast"]


class InMemoryBreakerBroadcast:
    """One hub: every ``opened`` reaches every current ``openings`` iteration."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self._clock = clock or FakeClock()
        self._until: dict[tuple[str, str], float] = {}
        self._followers: list[asyncio.Queue[BreakerOpening]] = []
        self.announced: list[BreakerOpening] = []

    async def opened(self, tenant_id: str, source_id: str, open_for_s: float) -> None:
        """Record the opening and hand it to every follower."""
        opening = BreakerOpening(tenant_id, source_id, open_for_s)
        self.announced.append(opening)
        self._until[(tenant_id, source_id)] = self._clock.monotonic() + open_for_s
        for queue in self._followers:
            queue.put_nowait(opening)

    async def openings(self) -> AsyncIterator[BreakerOpening]:
        """The openings still in force, then each new one, until the iteration is closed."""
        queue: asyncio.Queue[BreakerOpening] = asyncio.Queue()
        self._followers.append(queue)
        try:
            now = self._clock.monotonic()
            for (tenant_id, source_id), until in list(self._until.items()):
                if until > now:
                    yield BreakerOpening(tenant_id, source_id, until - now)
            while True:
                yield await queue.get()
        finally:
            self._followers.remove(queue)
