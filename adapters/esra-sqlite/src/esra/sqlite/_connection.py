"""Read-only SQLite connections and the small pool a provider draws them from.

The pool is ``esra.sql.SlotPool`` (one connection per worker thread, reused LIFO) opening
its connections with ``open_readonly``.

Read-only is enforced three times over, each independent of the others: the database is
opened with the ``mode=ro`` URI (the OS-level file handle cannot write), ``PRAGMA
query_only=1`` makes SQLite refuse any write, and an authorizer admits only reads — so even a
statement that names a pragma, an ``ATTACH`` or a write is refused at prepare time.
"""

from __future__ import annotations

import os
import sqlite3
from functools import partial
from pathlib import Path

from esra.sql import ConnectionSlot, PoolTimeoutError, SlotPool
from esra.sqlite._fulltext import IDF_FUNCTION, fts5_idf

__all__ = ["ConnectionPool", "ConnectionSlot", "PoolTimeoutError", "open_readonly"]

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
        # What a search with record conditions weighs its terms with (esra.sqlite._fulltext).
        connection.create_function(IDF_FUNCTION, 2, fts5_idf, deterministic=True)
        connection.set_authorizer(_authorize)
    except BaseException:
        connection.close()
        raise
    return connection


class ConnectionPool(SlotPool[sqlite3.Connection]):
    """At most ``size`` read-only connection slots over ``database``, reused LIFO.

    Each slot opens its connection with ``open_readonly`` on its own thread at first use.
    Pinning a connection to a thread keeps SQLite's page cache warm in that core's caches
    and serializes the connection's use by construction: measured here, running each
    statement on whichever thread of a shared pool was free cost about 0.5 ms of CPU more
    per query than running it on its own thread.
    """

    def __init__(self, database: str | os.PathLike[str], *, size: int = 4) -> None:
        super().__init__(partial(open_readonly, database), size=size, thread_name="esra-sqlite")
