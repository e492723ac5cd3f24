"""ThrottledWarning: one WARNING per interval for a failure that repeats on every request.

A Redis outage fails every cache read and every broadcast; logging each would bury the log
(and cost more than the request). The first failure is logged at once, later ones at most
once per interval, with the number that were not logged in between.
"""

from __future__ import annotations

import logging

from esra.core.ports import Clock

__all__ = ["DEFAULT_WARNING_INTERVAL_S", "ThrottledWarning"]

DEFAULT_WARNING_INTERVAL_S = 60.0


class ThrottledWarning:
    """Logs ``what`` failed at WARNING at most once per ``interval_s`` of ``clock.monotonic``."""

    def __init__(
        self, logger: logging.Logger, what: str, *, interval_s: float, clock: Clock
    ) -> None:
        self._logger = logger
        self._what = what
        self._interval_s = interval_s
        self._clock = clock
        self._last: float | None = None
        self._suppressed = 0

    def failed(self, operation: str, exc: BaseException) -> None:
        """Record one failure of ``operation``; log it unless one was logged recently.

        Only the exception's class is logged: a driver's message can quote a key.
        """
        now = self._clock.monotonic()
        if self._last is not None and now - self._last < self._interval_s:
            self._suppressed += 1
            return
        self._logger.warning(
            "%s: %s failed (%s); %d more failures since the last warning",
            self._what,
            operation,
            type(exc).__name__,
            self._suppressed,
        )
        self._last = now
        self._suppressed = 0
