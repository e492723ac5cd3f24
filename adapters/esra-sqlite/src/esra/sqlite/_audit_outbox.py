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

A held row this version cannot decode costs only itself (``esra.core.audit.read_held_row``):
it is reported and set aside, or, a newer ESRA's record, passed over; either way the claim
goes on to the next row.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from esra.core.audit import SET_ASIDE_PREFIX, AuditRecord, HeldRow, read_held_row
from esra.sqlite._dedicated_connection import DedicatedConnection

__all__ = ["OutboxClaim"]

# Rows set aside (``esra.core.audit.read_held_row``) are kept but never handed out again.
_SET_ASIDE_PATTERN = f"{SET_ASIDE_PREFIX}%"


def _held_row(table: str, seq: int, stored: str | bytes) -> HeldRow | None:
    """``read_held_row`` of a row as SQLite stores it: text, or bytes a hand edit left."""
    raw = stored if isinstance(stored, bytes) else stored.encode("utf-8", "surrogatepass")
    try:
        document = json.loads(stored) if isinstance(stored, str) else None
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
        document = None
    return read_held_row(table, seq, document, raw)


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

    def _oldest(
        self, connection: sqlite3.Connection, after: int = 0
    ) -> tuple[int, str | bytes] | None:
        """The oldest row after ``after`` not set aside (``record`` as stored: a hand edit
        may have left bytes)."""
        row = connection.execute(
            f"SELECT seq, record FROM {self._table} WHERE seq > ?"  # noqa: S608 - a constant
            " AND correlation_id NOT LIKE ? ORDER BY seq LIMIT 1",
            (after, _SET_ASIDE_PATTERN),
        ).fetchone()
        if row is None:
            return None
        stored = row["record"]
        return int(row["seq"]), stored if isinstance(stored, bytes) else str(stored)

    def _next_to_hand_out(self, connection: sqlite3.Connection) -> tuple[int, HeldRow] | None:
        """The oldest row a claim hands out, passing over newer ESRAs' records."""
        after = 0
        while (found := self._oldest(connection, after)) is not None:
            seq, stored = found
            handed = _held_row(self._table, seq, stored)
            if handed is not None:
                return seq, handed
            after = seq
        return None

    def pending(self, connection: sqlite3.Connection) -> list[AuditRecord]:
        """Every held record this version can decode, in order (for ``pending_audit``)."""
        rows = connection.execute(
            f"SELECT seq, record FROM {self._table}"  # noqa: S608 - a constant
            " WHERE correlation_id NOT LIKE ? ORDER BY seq",
            (_SET_ASIDE_PATTERN,),
        ).fetchall()
        held = (_held_row(self._table, int(row["seq"]), row["record"]) for row in rows)
        return [found.record for found in held if found is not None and found.delivered]

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
            found = await self._db.run(self._next_to_hand_out)
            if found is None:
                yield None
                return
            seq, handed = found
            yield handed.record

            def settle(connection: sqlite3.Connection) -> None:
                if handed.delivered:
                    connection.execute(f"DELETE FROM {self._table} WHERE seq = ?", (seq,))  # noqa: S608
                else:
                    connection.execute(
                        f"UPDATE {self._table} SET correlation_id = ? || correlation_id"  # noqa: S608
                        " WHERE seq = ?",
                        (SET_ASIDE_PREFIX, seq),
                    )

            await self._db.write(settle)
        finally:
            self._claimed = False
            if fd is not None:
                os.close(fd)
