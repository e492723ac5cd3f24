"""Read-only SQLite connections and the small pool a provider draws them from.

Read-only is enforced three times over, each independent of the others: the database is
opened with the ``mode=ro`` URI (the OS-level file handle cannot write), ``PRAGMA
query_only=1`` makes SQLite refuse any write, and an authorizer admits only reads — so even a
statement that names a pragma, an ``ATTACH`` or a write is refused at prepare time.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from pathlib import Path

__all__ = ["ConnectionPool", "PoolTimeoutError", "open_readonly"]

# Action codes an ESRA SELECT (and FTS5's own internal reads) needs; everything else —
# INSERT, UPDATE, DELETE, CREATE, DROP, PRAGMA, ATTACH, TRANSACTION... — is denied.
_ALLOWED_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
)
# FTS5's virtual-table constructor declares its schema (which SQLite authorizes as an UPDATE
# of the schema table, though nothing is written) and reads PRAGMA data_version. Both are
# admitted for exactly those objects; the read-only file handle and query_only still forbid
# any real write.
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master"})
_READ_ONLY_PRAGMAS = frozenset({"data_version"})


def _authorize(action: int, arg1: str | None, *_rest: object) -> int:
    allowed = (
        action in _ALLOWED_ACTIONS
        or (action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA_TABLES)
        or (action == sqlite3.SQLITE_PRAGMA and arg1 in _READ_ONLY_PRAGMAS)
    )
    return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY


def open_readonly(database: str | os.PathLike[str]) -> sqlite3.Connection:
    """Open ``database`` read-only: ``mode=ro`` URI, ``query_only``, read-only authorizer.

    The connection may be used from any thread (one at a time) and runs in autocommit mode,
    so no transaction is ever left open between statements.

    Raises:
        sqlite3.Error: if the file cannot be opened (it is never created).
    """
    uri = Path(database).resolve().as_uri() + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    try:
        connection.execute("PRAGMA query_only = 1")
        connection.set_authorizer(_authorize)
    except BaseException:
        connection.close()
        raise
    return connection


class PoolTimeoutError(Exception):
    """No connection became free before the caller's deadline."""


class ConnectionPool:
    """At most ``size`` read-only connections, opened lazily and reused last-in first-out.

    Thread-safe. Opening happens in the caller's (worker) thread, never at construction.
    """

    def __init__(self, database: str | os.PathLike[str], *, size: int = 4) -> None:
        if size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        self._database = database
        self._size = size
        self._idle: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._opened = 0
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self, timeout_s: float) -> sqlite3.Connection:
        """Return an idle connection, open a new one, or wait up to ``timeout_s`` seconds.

        Raises:
            PoolTimeoutError: when every connection stayed busy for ``timeout_s``.
            sqlite3.Error: when a new connection cannot be opened.
        """
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            may_open = self._opened < self._size
            if may_open:
                self._opened += 1
        if may_open:
            try:
                return open_readonly(self._database)
            except BaseException:
                with self._lock:
                    self._opened -= 1
                raise
        try:
            return self._idle.get(timeout=max(timeout_s, 0.0))
        except queue.Empty as exc:
            raise PoolTimeoutError from exc

    def release(self, connection: sqlite3.Connection) -> None:
        """Return ``connection`` to the pool (or close it if the pool was closed)."""
        with self._lock:
            closed = self._closed
            if closed:
                self._opened -= 1
        if closed:
            connection.close()
        else:
            self._idle.put(connection)

    def close(self) -> None:
        """Close idle connections now; busy ones close when released."""
        with self._lock:
            self._closed = True
        while True:
            try:
                connection = self._idle.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                self._opened -= 1
            connection.close()
