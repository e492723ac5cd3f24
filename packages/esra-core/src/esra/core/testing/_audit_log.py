"""InMemoryAuditLog: an audit backend and reader in a list, plus backends that misbehave.

``InMemoryAuditLog`` is the fake the audit contract suite runs against beside the real
stores. ``GatedBackend`` holds every write until its gate opens (a slow backend, to prove
backpressure by counting) and ``FlakyBackend`` fails a given number of writes first (to
prove retries lose and duplicate nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC

from esra.core._audit.batching import AuditBackend
from esra.core._audit.query import AuditPage, AuditQuery, page_of
from esra.core._audit.record import AuditRecord

__all__ = ["FlakyBackend", "GatedBackend", "InMemoryAuditLog"]


class InMemoryAuditLog:
    """Every written record in a list; ``batches`` counts the ``write_batch`` calls."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.batches: list[int] = []

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Append ``records``."""
        self.records.extend(records)
        self.batches.append(len(records))

    async def query(self, query: AuditQuery) -> AuditPage:
        """The tenant's matching records, newest first."""
        entries = [
            (record, seq)
            for seq, record in enumerate(self.records)
            if query.matches(record) and query.after_cursor(record.at, seq)
        ]
        entries.sort(key=lambda entry: (entry[0].at.astimezone(UTC), entry[1]), reverse=True)
        return page_of(entries[: query.limit + 1], query.limit)


class GatedBackend:
    """Passes writes to ``inner`` only once ``gate`` is set; ``waiting`` counts held writes."""

    def __init__(self, inner: AuditBackend) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.waiting = 0

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Wait for the gate, then write."""
        self.waiting += 1
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        await self.inner.write_batch(records)


class FlakyBackend:
    """Fails the first ``failures`` writes with ``OSError`` (writing nothing), then passes."""

    def __init__(self, inner: AuditBackend, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.attempts = 0

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Fail while failures remain, else write."""
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            msg = "backend down"
            raise OSError(msg)
        await self.inner.write_batch(records)
