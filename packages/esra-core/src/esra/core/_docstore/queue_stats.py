"""How much of a tenant's ingestion queue is waiting, and since when.

A document waits while it is Pending (not deleted): uploaded, returned for a retry, or
re-indexed by an operator, and not yet claimed by a worker. Its wait starts when it
entered the queue, not at its first upload, so re-indexing old documents does not look
like a months-old backlog.
"""

from __future__ import annotations

from datetime import datetime

import attrs

__all__ = ["QueueStats"]


@attrs.frozen
class QueueStats:
    """``waiting`` documents; ``oldest_queued_at`` when the longest-waiting one entered the
    queue (None when nothing waits)."""

    waiting: int = 0
    oldest_queued_at: datetime | None = None

    def age_s(self, now: datetime) -> float:
        """Seconds the longest-waiting document has waited at ``now`` (0 when none waits)."""
        if self.oldest_queued_at is None:
            return 0.0
        return max(0.0, (now - self.oldest_queued_at).total_seconds())
