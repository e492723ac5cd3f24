"""JsonLinesAuditLog: audit records appended as JSON lines to one file, and read back.

The stdlib-only durable backend (for ``BatchingAuditSink``) and its reader. Each batch is one
``write(2)`` on a descriptor opened ``O_APPEND`` for that batch, then ``fsync``: the kernel
places every batch at the file's current end, so several processes may append to one file
without interleaving lines, and a rotation (the file renamed away by ``logrotate``) is
honoured at the next batch, which creates a fresh file — no ``copytruncate`` is needed. The
file is created ``0600``: records name tenants and callers.

Lines are standard JSON in UTF-8 (``record_document`` makes every value carryable), and a
query's text filters are made whole the same way as the records they are compared with.

Reading parses the file as it is now (rotated files are not read). A line's ``seq`` is its
byte offset, which an append-only file never changes; a torn last line (a crash mid-write)
or any line that does not parse is skipped and counted in the log, never fatal.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import attrs

from esra.core._audit.codec import record_document, record_from_document
from esra.core._audit.query import AuditPage, AuditQuery, page_of
from esra.core._audit.record import AuditRecord
from esra.core._encodable import encodable

__all__ = ["JsonLinesAuditLog"]

_log = logging.getLogger(__name__)


class JsonLinesAuditLog:
    """Appends batches of records to ``path`` and answers ``AuditQuery`` over it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        """The file records are appended to."""
        return self._path

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Append ``records`` in one write and ``fsync`` the file."""
        if not records:
            return
        data = b"".join(
            json.dumps(record_document(r), sort_keys=True, separators=(",", ":")).encode() + b"\n"
            for r in records
        )
        await asyncio.to_thread(self._append, data)

    def _append(self, data: bytes) -> None:
        descriptor = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(descriptor).st_size
            if size and os.pread(descriptor, 1, size - 1) != b"\n":
                # A process killed in the middle of a write left a torn last line. Appended
                # to, it would swallow this batch's first record (acknowledged, fsynced, and
                # then unreadable); ended here, it stays a line of its own that readers skip.
                data = b"\n" + data
            view = memoryview(data)
            while view:
                written = os.write(descriptor, view)
                view = view[written:]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    async def query(self, query: AuditQuery) -> AuditPage:
        """The page of ``query``: the tenant's matching records, newest first."""
        return await asyncio.to_thread(self._query, query)

    def _query(self, query: AuditQuery) -> AuditPage:
        # Records read back hold whole text; so must what they are compared with.
        query = attrs.evolve(
            query,
            tenant_id=encodable(query.tenant_id),
            subject=None if query.subject is None else encodable(query.subject),
            correlation_id=None
            if query.correlation_id is None
            else encodable(query.correlation_id),
        )
        # The newest limit + 1 matches only, in a heap whose head is the oldest kept: the file
        # is never pruned, and holding every match would make one read's memory grow with
        # the tenant's whole history. (at, seq) is unique, so records are never compared.
        kept: list[tuple[datetime, int, AuditRecord]] = []
        size = query.limit + 1
        skipped = 0
        try:
            handle = self._path.open("rb")
        except FileNotFoundError:
            return AuditPage(records=())
        with handle:
            offset = 0
            for line in handle:
                seq, offset = offset, offset + len(line)
                if line == b"\n":
                    continue  # two writers both ended the same torn line
                if not line.endswith(b"\n"):
                    skipped += 1  # a torn last line: its batch never completed
                    continue
                try:
                    record = record_from_document(json.loads(line))
                except (ValueError, KeyError, TypeError):
                    skipped += 1
                    continue
                if query.matches(record) and query.after_cursor(record.at, seq):
                    entry = (record.at.astimezone(UTC), seq, record)
                    if len(kept) < size:
                        heapq.heappush(kept, entry)
                    elif entry[:2] > kept[0][:2]:
                        heapq.heapreplace(kept, entry)
        if skipped:
            _log.warning("audit file: %d unreadable lines skipped", skipped)
        kept.sort(key=lambda entry: entry[:2], reverse=True)
        return page_of([(record, seq) for _, seq, record in kept], query.limit)
