"""The system clock: the production ``Clock``."""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["SystemClock"]


class SystemClock:
    """Wall-clock time in UTC and the process's monotonic clock."""

    def now(self) -> datetime:
        """Return the current aware UTC datetime."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()
