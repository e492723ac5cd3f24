"""Read-only SQLite connections and the small pool a provider draws them from.

The pool is ``esra.sql.SlotPool`` (one connection per worker thread, reused LIFO) opening
its connections with ``open_readonly``.

Read-only is enforced three times over, each independent of the others: the database is
opened with the ``mode=ro`` URI (the OS-level file handle cannot write), ``PRAGMA
query_only=1`` makes SQLite refuse any write, and an authorizer admits only reads — so even a
statement that names a pragma, an ``ATTACH`` or a write is refused at prepare time.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from functools import partial
from pathlib import Path

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.sql import ConnectionSlot, PoolTimeoutError, SlotPool
from esra.sqlite._esra_files import esra_schema_of
from esra.sqlite._fulltext import IDF_FUNCTION, fts5_idf

__all__ = ["ConnectionPool", "ConnectionSlot", "PoolTimeoutError", "open_readonly"]

_log = logging.getLogger(__name__)

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


def open_readonly(
    database: str | os.PathLike[str], *, refuse_esra_files: bool = False
) -> sqlite3.Connection:
    """Open ``database`` read-only: ``mode=ro`` URI, ``query_only``, read-only authorizer.

    The connection may be used from any thread (one at a time) and runs in autocommit mode,
    so no transaction is ever left open between statements.

    Args:
        database: the file.
        refuse_esra_files: refuse a file holding one of ESRA's own schemas (a document
            store, configuration, audit, secrets: ``esra_schema_of``). A plain source's
            connections set it, so choosing the plain kind never bypasses the isolation the
            store kind enforces. Checked at each connection, so a file that became a store
            after the source opened is refused too.

    Raises:
        sqlite3.Error: if the file cannot be opened (it is never created).
        ProviderError: ``PERMISSION_DENIED``, the file is ESRA's and ``refuse_esra_files``.
    """
    path = Path(database).resolve()
    connection = sqlite3.connect(
        path.as_uri() + "?mode=ro", uri=True, check_same_thread=False, isolation_level=None
    )
    try:
        # Before the authorizer: reading sqlite_master is a read it would admit anyway.
        schema = esra_schema_of(connection) if refuse_esra_files else None
        if schema is not None:
            _log.warning(
                "%s is ESRA's own %s database: a plain source may not read it", path, schema
            )
            raise ProviderError(ProviderErrorCode.PERMISSION_DENIED)
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

    def __init__(
        self, database: str | os.PathLike[str], *, size: int = 4, refuse_esra_files: bool = False
    ) -> None:
        opener = partial(open_readonly, database, refuse_esra_files=refuse_esra_files)
        super().__init__(opener, size=size, thread_name="esra-sqlite")
