"""SqliteFts5Provider: the embedded ``SearchProvider`` over SQLite FTS5, no server needed.

The shared shell (``esra.sql.SqlSearchProvider``) refuses anything the validator did not
issue and builds (or reuses) the shared SQLAlchemy statement with the FTS5 strategy; the
SQLite part here runs it on a pooled read-only connection, on the one thread that connection
is pinned to. A progress handler stops the statement at its deadline (``TIMEOUT``);
cancelling the awaiting task interrupts the statement at once and re-raises the
cancellation, and the interrupted statement itself is classified ``CANCELLED``. Every
``sqlite3`` failure leaves as ``ProviderError(code)``; its text goes to the log only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from sqlalchemy.dialects import sqlite as sqlite_dialect

from esra.core.codes import ProviderErrorCode
from esra.core.config import Mapping
from esra.core.exceptions import ProviderError
from esra.core.ports import TextIndexKind
from esra.core.providers import ValidatedQuery
from esra.sql import (
    HEALTH_TIMEOUT_S,
    BuiltStatement,
    CompiledStatementCache,
    EngineTraits,
    SqlSearchProvider,
    StatementBuilder,
    TimeBudget,
    utf8_bindable,
)
from esra.sqlite._connection import ConnectionPool, ConnectionSlot, PoolTimeoutError
from esra.sqlite._errors import ExecutionState, classify
from esra.sqlite._fulltext import MAX_SCORED_TERMS, Fts5FullText

__all__ = ["SqliteFts5Provider"]

_log = logging.getLogger("esra.sqlite")


class _Execution:
    """One statement's deadline and cancellation, shared by the event loop and its worker."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.state = ExecutionState()
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    def progress(self) -> int:
        """SQLite progress handler: a non-zero return interrupts the running statement."""
        if self.state.cancelled:
            return 1
        if time.monotonic() >= self.deadline:
            self.state.timed_out = True
            return 1
        return 0

    def attach(self, connection: sqlite3.Connection) -> None:
        with self._lock:
            self._connection = connection

    def detach(self) -> None:
        with self._lock:
            self._connection = None

    def cancel(self) -> None:
        """Flag the execution cancelled and interrupt its statement if one is running."""
        with self._lock:
            self.state.cancelled = True
            if self._connection is not None:
                self._connection.interrupt()


class _SqliteEngine:
    """The SQLite part of the provider: a pool of read-only connections to one file, each
    pinned to its own thread, and the progress handler that stops a statement."""

    traits = EngineTraits(
        name="sqlite", text_index=TextIndexKind.SQLITE_FTS5, terms_need_text_index=True
    )

    def __init__(
        self,
        database: str | os.PathLike[str],
        *,
        pool_size: int,
        progress_interval: int,
        cache: CompiledStatementCache | None,
        refuse_esra_files: bool,
    ) -> None:
        self._pool = ConnectionPool(database, size=pool_size, refuse_esra_files=refuse_esra_files)
        self._pool_size = pool_size
        # Per event loop, a semaphore as wide as the pool (see ``_acquire``). Keyed weakly,
        # so a finished loop (a test's, a restarted server's) takes its semaphore with it.
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._gates = weakref.WeakKeyDictionary()
        self._progress_interval = max(1, progress_interval)
        self._builder = StatementBuilder(
            sqlite_dialect.dialect(paramstyle="named"), Fts5FullText(), cache=cache
        )

    @property
    def builder(self) -> StatementBuilder:
        return self._builder

    async def statement_builder(self) -> StatementBuilder:
        return self._builder

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> list[Any]:
        """Wait for a connection, then run on its thread under the progress handler."""
        timeout_s = budget.seconds
        execution = _Execution(time.monotonic() + timeout_s)
        gate = await self._acquire(timeout_s)
        try:
            try:
                slot = await self._pool.acquire_async(timeout_s)
            except PoolTimeoutError as exc:
                raise ProviderError(ProviderErrorCode.TIMEOUT) from exc
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    slot.executor, self._run, slot, built, execution, query
                )
            except asyncio.CancelledError:
                # The slot's thread runs one statement at a time, so the slot can go back
                # now: the interrupted statement finishes before anything else runs on it.
                execution.cancel()
                raise
            finally:
                self._pool.release(slot)
        finally:
            gate.release()

    async def _acquire(self, timeout_s: float) -> asyncio.Semaphore:
        """Wait on the event loop, up to ``timeout_s``, until the pool should have a slot.

        Executions beyond the pool's size queue here rather than in the pool, whose waiting
        parks a thread of the loop's default executor per waiter and wakes it through a
        condition variable on every release: under load that thread traffic cost more than
        the statements. Admitted executions then find an idle slot at once (unless another
        loop or a health check holds one, when the pool's own wait still applies).

        Returns the semaphore to release once the slot is back.

        Raises:
            ProviderError: ``TIMEOUT`` when no turn came within ``timeout_s``.
        """
        loop = asyncio.get_running_loop()
        try:
            gate = self._gates.get(loop)
            if gate is None:
                gate = self._gates[loop] = asyncio.Semaphore(self._pool_size)
        except TypeError:
            # A loop that cannot be weakly referenced gets a semaphore of its own per call,
            # free at once: the pool's own wait then applies, as it did before this gate.
            gate = asyncio.Semaphore(1)
        if not gate.locked():
            await gate.acquire()  # free: returns without suspending
            return gate
        try:
            async with asyncio.timeout(timeout_s):
                await gate.acquire()
        except TimeoutError as exc:
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc
        return gate

    def _run(
        self,
        slot: ConnectionSlot[sqlite3.Connection],
        built: BuiltStatement,
        execution: _Execution,
        query: ValidatedQuery,
    ) -> list[Any]:
        """Slot-thread body: open the connection if needed, run under the progress handler."""
        params = {name: utf8_bindable(value) for name, value in built.params.items()}
        text_index = query.mapping.text_index
        if execution.state.cancelled:
            raise ProviderError(ProviderErrorCode.CANCELLED)
        try:
            connection = slot.connection()
        except sqlite3.Error as exc:
            raise self._failure(exc, query, text_index, execution.state) from exc
        execution.attach(connection)
        connection.set_progress_handler(execution.progress, self._progress_interval)
        try:
            return connection.execute(built.sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._failure(exc, query, text_index, execution.state) from exc
        finally:
            execution.detach()
            connection.set_progress_handler(None, 0)

    @staticmethod
    def _failure(
        exc: sqlite3.Error,
        query: ValidatedQuery,
        text_index: str | None,
        state: ExecutionState,
    ) -> ProviderError:
        code = classify(exc, text_index=text_index, state=state)
        # Driver text may name tables or echo content: log only, never in the error.
        _log.warning("sqlite query %s failed as %s: %s", query.query_id, code.value, exc)
        return ProviderError(code)

    async def readiness(self, mappings: Sequence[Mapping]) -> list[bool]:
        """Open the database and check each mapping's relation and FTS table, on a slot.

        Raises:
            ProviderError: ``RESOURCE_EXHAUSTED`` when every connection stays busy.
            sqlite3.Error: the database cannot be opened or read.
        """
        try:
            slot = await self._pool.acquire_async(HEALTH_TIMEOUT_S)
        except PoolTimeoutError as exc:
            raise ProviderError(ProviderErrorCode.RESOURCE_EXHAUSTED) from exc
        try:
            return await asyncio.get_running_loop().run_in_executor(
                slot.executor, self._readiness, slot, mappings
            )
        finally:
            self._pool.release(slot)

    def _readiness(
        self, slot: ConnectionSlot[sqlite3.Connection], mappings: Sequence[Mapping]
    ) -> list[bool]:
        connection = slot.connection()
        connection.execute("SELECT 1").fetchall()
        return [self._mapping_ready(connection, m) for m in mappings]

    @staticmethod
    def _mapping_ready(connection: sqlite3.Connection, mapping: Mapping) -> bool:
        schema = sqlite_dialect.dialect().identifier_preparer.quote_identifier(
            mapping.schema or "main"
        )
        rows = connection.execute(
            f"SELECT name, sql FROM {schema}.sqlite_master WHERE type IN ('table', 'view')"  # noqa: S608 - schema is a quoted configured identifier
        ).fetchall()
        objects = {name: sql or "" for name, sql in rows}
        if mapping.relation not in objects:
            return False
        if mapping.text_index is None:
            return True
        definition = objects.get(mapping.text_index, "").lower()
        return "virtual table" in definition and "fts5" in definition

    def close(self) -> None:
        self._pool.close()


class SqliteFts5Provider(SqlSearchProvider[_SqliteEngine]):
    """Searches one SQLite database through external-content FTS5 tables, read-only.

    Args:
        database: path of the SQLite file (opened ``mode=ro``; never created).
        mappings: the source's mappings, checked by ``health()`` (relation and FTS table
            exist); executions use the mapping carried by each query.
        pool_size: connections kept per provider (each execution holds one).
        max_rows: the largest row cap this provider accepts (stated in ``capabilities``).
        progress_interval: SQLite VM instructions between deadline checks.
        cache: compiled-statement cache; a fresh 256-entry LRU by default.
        refuse_esra_files: refuse, at each connection, a file holding one of ESRA's own
            schemas (``open_readonly``) with ``PERMISSION_DENIED``. The ``sqlite`` kind's
            sources set it; a document store's own kind, which opens its file through its
            isolating mapping, does not.

    Nothing is opened at construction; call ``close()`` when done.
    """

    def __init__(
        self,
        database: str | os.PathLike[str],
        *,
        mappings: Sequence[Mapping] = (),
        pool_size: int = 4,
        max_rows: int = 200,
        progress_interval: int = 1000,
        cache: CompiledStatementCache | None = None,
        refuse_esra_files: bool = False,
    ) -> None:
        engine = _SqliteEngine(
            database,
            pool_size=pool_size,
            progress_interval=progress_interval,
            cache=cache,
            refuse_esra_files=refuse_esra_files,
        )
        super().__init__(
            engine, mappings=mappings, max_rows=max_rows, max_scored_terms=MAX_SCORED_TERMS
        )

    def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._engine.close()
