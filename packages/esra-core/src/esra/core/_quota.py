"""InProcessQuotaStore: hourly per-caller character budgets held in this process's memory.

Right for one runtime instance (the embedded default, a single host process). Several
instances behind a load balancer each keep their own count, so each would grant the whole
budget; they need a shared ``QuotaStore`` instead.
"""

from __future__ import annotations

import asyncio

from esra.core._clock import SystemClock
from esra.core.ports import Clock

__all__ = ["InProcessQuotaStore"]


class InProcessQuotaStore:
    """Counts characters per (tenant, caller) within the clock's current UTC hour.

    Only the current hour is kept: the first consumption in a new hour forgets the previous
    ones, so memory stays bounded by the number of active callers.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._hour = ""
        self._used: dict[tuple[str, str], int] = {}
        self._lock = asyncio.Lock()

    async def consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        """Consume ``amount`` if it fits within ``limit`` this hour; return whether it did.

        A negative ``amount`` is refused rather than credited back.
        """
        if amount < 0:
            return False
        hour = self._clock.now().strftime("%Y%m%d%H")
        async with self._lock:
            if hour != self._hour:
                self._hour = hour
                self._used.clear()
            key = (tenant_id, caller)
            used = self._used.get(key, 0)
            if used + amount > limit:
                return False
            self._used[key] = used + amount
            return True
