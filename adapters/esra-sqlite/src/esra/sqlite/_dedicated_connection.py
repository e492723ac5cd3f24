"""``DedicatedConnection``: one writable SQLite connection on its own thread, awaited.

ESRA's own stores on SQLite (the document store, the configuration store, the audit log, the
secret table) each own a database file they write. A ``sqlite3`` connection must not be used
by two threads at once and its statements must not block the event loop, so each store keeps
exactly one connection pinned to one worker thread (an ``esra.sql.ConnectionSlot``) and
awaits its statements there: use is serialised by construction. Other handles, in this
process or another, may open the same file: the connection runs in WAL mode (readers never
block the writer) with a busy timeout (a writer waits for the lock instead of failing), and
``write`` runs its work in one ``BEGIN IMMEDIATE`` transaction.

This is not the read-only pool ``esra.sqlite._connection`` gives providers over customer
databases: those connections can never write; these exist to write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TypeVar

from esra.sql import ConnectionSlot
from esra.sqlite._transactions import immediate_transaction

__all__ = ["BUSY_TIMEOUT_MS", "DedicatedConnection", "open_writable"]

BUSY_TIMEOUT_MS = 10_000
_PING = "SELECT count(*) FROM sqlite_master"

_T = TypeVar("_T")


def open_writable(
    database: str | os.PathLike[str],
    *,
    pragmas: Sequence[str] = (),
    prepare: Callable[[sqlite3.Connection], object] | None = None,
) -> sqlite3.Connection:
    """Open ``database`` (created if absent) writable: autocommit, ``sqlite3.Row`` rows, WAL.

    Args:
        database: the file.
        pragmas: further ``PRAGMA`` statements the store needs, run in order after the
            busy timeout and the journal mode.
        prepare: run last on the new connection (a store that applies its schema on open).

    Raises:
        sqlite3.Error: if the file cannot be opened or set up (the connection is closed).
        OSError: if the absent file cannot be created.
    """
    _create_owner_only(database)
    connection = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    try:
        connection.row_factory = sqlite3.Row
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _switch_to_wal(connection)
        for pragma in pragmas:
            connection.execute(pragma)
        if prepare is not None:
            prepare(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _create_owner_only(database: str | os.PathLike[str]) -> None:
    """Create ``database`` empty and readable by its owner only, unless it exists.

    These files hold audit records, configuration, wrapped secrets and documents; SQLite
    would create one with the process umask's mode (``0644`` commonly), readable by every
    local user wherever the directory lets them in. SQLite gives the ``-wal`` and ``-shm``
    files the database's mode. Any path that exists is the operator's and is left as it is
    — a file, or a link (``O_EXCL`` creates nothing through one; SQLite then opens it as
    placed, a dangling link's target with the umask's mode).
    """
    path = os.fspath(database)
    if path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _switch_to_wal(connection: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode = WAL``, waiting for the lock like every other statement.

    Switching a fresh file to WAL needs an exclusive lock, and SQLite answers "database is
    locked" at once instead of calling the busy handler when another connection holds it —
    two processes opening one new store together lost about one race in sixty. Retried with
    a short backoff for up to the busy timeout, then the error stands.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class DedicatedConnection:
    """A store's one writable connection to ``database``, opened lazily on its own thread.

    Args:
        database: the store's file (created if absent).
        thread_name: prefix of the worker thread's name (``esra-audit``, ...).
        pragmas: passed to ``open_writable``.
        prepare: passed to ``open_writable``.

    ``close()`` when done; nothing may run after it.
    """

    def __init__(
        self,
        database: str | os.PathLike[str],
        *,
        thread_name: str,
        pragmas: Sequence[str] = (),
        prepare: Callable[[sqlite3.Connection], object] | None = None,
    ) -> None:
        self._path = Path(database)
        self._slot = ConnectionSlot(
            partial(open_writable, self._path, pragmas=pragmas, prepare=prepare), thread_name
        )

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    async def run(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` on the connection's thread (opening it first if need be)."""

        def body() -> _T:
            return work(self._slot.connection())

        return await asyncio.get_running_loop().run_in_executor(self._slot.executor, body)

    async def write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction (rolled back if it raises)."""

        def transaction(connection: sqlite3.Connection) -> _T:
            with immediate_transaction(connection):
                return work(connection)

        return await self.run(transaction)

    async def ping(self) -> None:
        """Read the file's schema table: the cheapest statement that touches the file (a
        ``SELECT 1`` would answer from memory). Queued behind the connection's other work.

        Raises:
            sqlite3.Error: the database cannot be opened or read.
        """
        await self.run(lambda connection: connection.execute(_PING).fetchone())

    async def close(self) -> None:
        """Close the connection once queued work has finished, and stop the thread."""

        if self._slot.opened is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._slot.executor, self._slot.discard
            )
        self._slot.executor.shutdown(wait=True)
