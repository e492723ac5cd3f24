"""The claim of an audit outbox table in SQLite: one forwarder at a time, across processes.

Both outboxes on SQLite — the configuration store's (``config_audit_outbox``) and each
document store's (``store_audit_outbox``) — hold audit records in a table ``(seq, record
json, ...)`` until the audit sink has them (``esra.core.admin.AuditOutbox``).
``OutboxClaim.claim`` is their ``claim_audit``: it hands the oldest held record to one
forwarder at a time across the processes on the file, under an exclusive ``flock`` on a lock
file beside the database, taken without waiting (held: another process is forwarding) and
released by the kernel with a process that dies; the record is deleted in a short write once
the block completes. Not an SQLite transaction: one held across the audit sink's call would
keep every writer out of the file meanwhile, an audit log on the same file included.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from esra.core.audit import AuditRecord, record_from_document
from esra.sqlite._dedicated_connection import DedicatedConnection

__all__ = ["OutboxClaim"]


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on ``path`` (created ``0600`` if absent), not waited for: the open
    descriptor holding it, or ``None`` where another holds it. Closing the descriptor, or the
    process ending, releases it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if sys.platform == "win32":
            import msvcrt  # noqa: PLC0415

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl  # noqa: PLC0415

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        # Held elsewhere (POSIX answers EWOULDBLOCK, Windows EACCES).
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


class OutboxClaim:
    """Claims of the outbox ``table`` of ``db``'s database, under the lock file named
    ``<database>-<lock_suffix>`` beside it.

    ``table`` is one of this package's constants, never configuration. An in-memory database
    has no lock file: no other process can open it, so its claims are this handle's alone.
    """

    def __init__(self, db: DedicatedConnection, table: str, lock_suffix: str) -> None:
        self._db = db
        self._table = table
        path = db.path
        self._lock_file = (
            None if str(path) == ":memory:" else path.with_name(f"{path.name}-{lock_suffix}")
        )
        # Within this handle a claim is held by one block at a time.
        self._claimed = False

    def _oldest(self, connection: sqlite3.Connection) -> tuple[int, str] | None:
        row = connection.execute(
            f"SELECT seq, record FROM {self._table} ORDER BY seq LIMIT 1"  # noqa: S608 - a constant
        ).fetchone()
        return (int(row["seq"]), str(row["record"])) if row is not None else None

    @contextlib.asynccontextmanager
    async def claim(self) -> AsyncIterator[AuditRecord | None]:
        """The oldest held record while the block runs, deleted when it completes and kept
        when it raises (``None``: nothing held, or another process or handle is forwarding)."""
        # One query when nothing is held; the lock file is touched only when something is.
        if self._claimed or await self._db.run(self._oldest) is None:
            yield None
            return
        fd: int | None = None
        lock_file = self._lock_file
        if lock_file is not None:
            fd = await self._db.run(lambda _: _try_lock(lock_file))
            if fd is None:
                yield None
                return
        self._claimed = True
        try:
            # Read under the claim: the holder before may have delivered what was seen.
            found = await self._db.run(self._oldest)
            if found is None:
                yield None
                return
            seq, text = found
            yield record_from_document(json.loads(text))

            def settle(connection: sqlite3.Connection) -> None:
                connection.execute(f"DELETE FROM {self._table} WHERE seq = ?", (seq,))  # noqa: S608

            await self._db.write(settle)
        finally:
            self._claimed = False
            if fd is not None:
                os.close(fd)
