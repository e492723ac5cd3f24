"""Time as the core reads it: the ``Clock`` port and the system clock that implements it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """**Protocol:** the current time, injected so expiry, freshness and breakers are testable."""

    def now(self) -> datetime:
        """Return the current aware UTC datetime."""
        ...

    def monotonic(self) -> float:
        """Return a monotonic reading in seconds for durations and deadlines."""
        ...


class SystemClock:
    """Wall-clock time in UTC and the process's monotonic clock."""

    def now(self) -> datetime:
        """Return the current aware UTC datetime."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()
