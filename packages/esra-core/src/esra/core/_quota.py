"""InProcessQuotaStore: hourly per-caller character budgets held in this process's memory.

Right for one runtime instance (the embedded default, a single host process). Several
instances behind a load balancer each keep their own count, so each would grant the whole
budget; they need a shared ``QuotaStore`` instead.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from esra.core._clock import SystemClock
from esra.core.ports import Clock

__all__ = ["InProcessQuotaStore"]


class InProcessQuotaStore:
    """Counts characters per (tenant, caller) within the clock's current UTC hour.

    Only the latest hour seen is kept: the first consumption in a later hour forgets the
    previous ones, so memory stays bounded by the number of active callers. A reading of an
    earlier hour (the clock stepped back) counts into the latest one, so a step back across
    the hour boundary never hands every caller a second budget.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._hour: datetime | None = None
        self._used: dict[tuple[str, str], int] = {}
        self._lock = asyncio.Lock()

    async def consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        """Consume ``amount`` if it fits within ``limit`` this hour; return whether it did.

        Anything but a non-negative integer ``amount`` and ``limit`` (a bool, a float, NaN
        included) is refused and spends nothing: a negative amount would credit the budget
        back, and a NaN, compared, admits everything — kept in the count, for the rest of
        the hour. An ``amount`` of 0 spends nothing and asks whether ``limit`` is not yet
        reached.
        """
        if not (_is_count(amount) and _is_count(limit)):
            return False
        # The UTC hour whatever zone the clock reads in: a clock at UTC+05:30 would
        # otherwise end every hour at half past.
        now = self._clock.now().astimezone(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        async with self._lock:
            if self._hour is None or hour > self._hour:
                self._hour = hour
                self._used.clear()
            key = (tenant_id, caller)
            used = self._used.get(key, 0)
            if used + amount > limit:
                return False
            self._used[key] = used + amount
            return True


def _is_count(value: object) -> bool:
    """Whether ``value`` is an integer of 0 or more, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
