"""MySqlProvider: the ``SearchProvider`` over MySQL 8 / MariaDB 10.6+ FULLTEXT, via
mysql-connector-python.

Nothing connects at construction. On first use the source's connection template is resolved
(``esra.sql.resolve_connection``: template check, host allowlist, then secrets — all before
any socket), a per-provider pool is made, and the first connection reads the server's flavour
and full-text token rules.

The shared shell (``esra.sql.SqlSearchProvider``) refuses anything the validator did not
issue and builds (or reuses) the shared SQLAlchemy statement; the MySQL part here runs it on
a pooled connection on that connection's own worker thread, as one server-side prepared
statement whose text holds a ``?`` for every value (``esra.mysql._placeholders``) and whose
values travel apart from it, in the binary protocol: no term, filter value or claim is ever
part of the text the server parses. Each pooled connection keeps the statements it prepared
(``esra.mysql._statement_cache``), so a search whose text it has seen is one round trip. The
session is ``SET SESSION TRANSACTION READ ONLY`` at connect and runs in autocommit, so the bounded
SELECT is a read-only transaction of its own. An explicit ``START TRANSACTION READ ONLY``
and ``ROLLBACK`` around it would be two more round trips adding nothing: the session's
characteristic refuses every write, in a transaction or not, and one SELECT reads one
consistent snapshot. Only a failed execution is followed by a ``ROLLBACK``: one that does
not come back clean drops a connection left mid-exchange. The current database is the
template's and never changes (a mapping's ``schema`` qualifies its table). The statement
carries a server-side time limit (see ``esra.mysql._server``); a client-side backstop one
second later, or cancellation of the awaiting task, sends ``KILL QUERY <connection id>`` from
a separate connection. Every driver failure leaves as ``ProviderError(code)``; its text goes
to the log.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import attrs
from mysql.connector import Error as DriverError
from mysql.connector.connection import MySQLConnection

from esra.core.codes import ProviderErrorCode
from esra.core.config import Mapping
from esra.core.exceptions import ProviderError
from esra.core.ports import HostAllowlist, SecretStore, TextIndexKind
from esra.core.providers import ValidatedQuery
from esra.mysql._bm25 import MAX_SCORED_TERMS
from esra.mysql._errors import ExecutionState, classify, is_connection_lost
from esra.mysql._fulltext import MatchAgainstFullText
from esra.mysql._index import fulltext_index_columns
from esra.mysql._placeholders import prepared_text
from esra.mysql._prepared import fetch_all
from esra.mysql._quote import DIALECT
from esra.mysql._server import ServerInfo, detect_server, reusable_limit_s, with_timeout
from esra.mysql._session import open_session
from esra.mysql._statement_cache import PreparedStatements
from esra.sql import (
    HEALTH_TIMEOUT_S,
    BuiltStatement,
    CompiledStatementCache,
    ConnectionSlot,
    ConnectionTemplate,
    EngineTraits,
    PoolTimeoutError,
    SlotPool,
    SourceConnection,
    SqlSearchProvider,
    StatementBuilder,
    TimeBudget,
    check_public_file,
    utf8_bindable,
)

__all__ = ["SCHEMES", "TEMPLATE_OPTIONS", "MySqlProvider"]

# Record-level security compares text under this collation, not the column's: a column's
# ``utf8mb4_unicode_ci`` (or any _ci/_ai collation) makes a claim ``EMEA`` or ``émea`` equal
# ``emea``. ``utf8mb4_bin`` compares code points and exists on MySQL 5.5+ and every MariaDB;
# its PAD SPACE is harmless, since a claim padded with whitespace is refused before binding.
RECORD_TEXT_COLLATION = "utf8mb4_bin"

_log = logging.getLogger("esra.mysql")

SCHEMES: dict[str, int] = {"mysql": 3306, "mariadb": 3306}
# Query options a connection template may carry; anything else is CONNECTION_TEMPLATE_INVALID.
TEMPLATE_OPTIONS = frozenset({"ssl_ca", "ssl_verify_identity", "connect_timeout"})

_GRACE_S = 1.0


@attrs.frozen
class _Job:
    """What a slot's thread runs: bounded command text, its values in placeholder order, and
    how to classify a failure."""

    sql: str
    values: tuple[object, ...]
    query_id: str
    has_index: bool


class _Execution:
    """One statement's stop requests, shared by the event loop, its worker and the killer."""

    def __init__(self) -> None:
        self.state = ExecutionState()
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self._killing = False
        self._killed = threading.Event()

    def attach(self, thread_id: int) -> None:
        """Record the server connection id the statement runs on (worker thread)."""
        with self._lock:
            self._thread_id = thread_id

    def stopped(self) -> bool:
        with self._lock:
            return self.state.cancelled or self.state.timed_out

    def request_stop(self, *, timed_out: bool) -> int | None:
        """Flag the stop; return the connection id to kill, or None if nothing runs yet."""
        with self._lock:
            if timed_out:
                self.state.timed_out = True
            else:
                self.state.cancelled = True
            if self._thread_id is None or self._killing:
                return None
            self._killing = True
            return self._thread_id

    def kill_sent(self) -> None:
        self._killed.set()

    def settle(self, wait_s: float) -> None:
        """Wait for an in-flight KILL QUERY so it cannot hit this connection's next statement."""
        with self._lock:
            killing = self._killing
        if killing:
            self._killed.wait(wait_s)


class _MySqlEngine:
    """The MySQL part of the provider: read-only sessions pinned to threads, the server's
    flavour and token rules learnt at first connect, and ``KILL QUERY`` to stop a statement."""

    traits = EngineTraits(name="mysql", text_index=TextIndexKind.MYSQL_FULLTEXT)

    def __init__(
        self,
        connection: SourceConnection,
        *,
        pool_size: int,
        connect_timeout_s: float,
        cache: CompiledStatementCache | None,
    ) -> None:
        if pool_size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        self._connection = connection
        self._pool_size = pool_size
        self._connect_timeout_s = connect_timeout_s
        self._cache = cache if cache is not None else CompiledStatementCache()
        self._pool: SlotPool[PreparedStatements] | None = None
        self._server: ServerInfo | None = None
        self._builder: StatementBuilder | None = None
        self._closed = False
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @property
    def server(self) -> ServerInfo | None:
        return self._server

    @property
    def builder(self) -> StatementBuilder | None:
        return self._builder

    async def statement_builder(self) -> StatementBuilder:
        """The builder for the server's flavour and token rules (learnt on first use)."""
        _, _, builder = await self._ready()
        return builder

    # -- setup ---------------------------------------------------------------------------

    def _ready_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def _ready(self) -> tuple[SlotPool[PreparedStatements], ServerInfo, StatementBuilder]:
        """Resolve the template, make the pool and learn the server, once.

        Raises:
            ProviderError: the template, allowlist and secret codes, or the classified
                failure of the first connection.
        """
        async with self._ready_lock():
            if self._closed:
                raise ProviderError(ProviderErrorCode.UNKNOWN)
            if self._pool is None:
                await self._resolve()
                self._pool = SlotPool(self._session, size=self._pool_size, thread_name="esra-mysql")
            else:
                await self._connection.target()  # the loop a slot's opener resolves on
            if self._server is None or self._builder is None:
                server = await self._on_slot(self._pool, self._detect, timeout_s=None)
                self._builder = StatementBuilder(
                    DIALECT,
                    MatchAgainstFullText(server.rules),
                    cache=self._cache,
                    record_text_collation=RECORD_TEXT_COLLATION,
                )
                self._server = server
                _log.info("mysql source is %s %s", server.flavor.value, server.version)
            return self._pool, self._server, self._builder

    async def _resolve(self) -> None:
        parsed = ConnectionTemplate.parse(self._connection.template, schemes=SCHEMES)
        if any(key not in TEMPLATE_OPTIONS for key, _ in parsed.options):
            _log.warning("mysql connection template has an unsupported option")
            raise ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
        target = await self._connection.target()
        timeout = target.option("connect_timeout")
        if timeout is not None and not timeout.isdigit():
            raise ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)

    def _connect(self) -> MySQLConnection:
        """Open one read-only session (runs on a slot's thread or the killer's)."""
        target = self._connection.resolve_from_thread()  # the secret as it is now
        ca = target.option("ssl_ca")
        if ca:
            # Checked as resolved for this connection (a reference may name another file
            # now): the driver reads it to the end, and a FIFO would hold this thread for ever.
            check_public_file(ca)
        return open_session(target, connect_timeout_s=self._connect_timeout_s)

    def _session(self) -> PreparedStatements:
        """Open a pooled session, which keeps the searches it prepares (a slot's thread)."""
        return PreparedStatements(self._connect())

    def _detect(self, slot: ConnectionSlot[PreparedStatements]) -> ServerInfo:
        try:
            return detect_server(slot.connection().connection)
        except DriverError as exc:
            raise self._failure(exc, slot, "connect", ExecutionState(), True) from exc

    async def _on_slot(
        self, pool: SlotPool[PreparedStatements], work: Any, timeout_s: float | None
    ) -> Any:
        """Run ``work(slot)`` on a slot's thread; the slot returns when the work ends."""
        try:
            slot = await pool.acquire_async(HEALTH_TIMEOUT_S if timeout_s is None else timeout_s)
        except PoolTimeoutError as exc:
            raise ProviderError(ProviderErrorCode.RESOURCE_EXHAUSTED) from exc
        future = slot.executor.submit(work, slot)
        future.add_done_callback(lambda _: pool.release(slot))
        return await asyncio.wrap_future(future)

    # -- execution -----------------------------------------------------------------------

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> list[Any]:
        """Run the bounded statement on a slot's thread; stop it with KILL QUERY if need be.

        The budget counts from the call: learning the server on first use spends it too.
        """
        pool, server, _ = await self._ready()  # done by statement_builder(): only the lock
        try:
            remaining = budget.remaining()
            text = prepared_text(built.sql)
            sql = with_timeout(text.sql, server.flavor, reusable_limit_s(remaining))
            values = tuple(utf8_bindable(value) for value in text.values(built.params))
        except Exception as exc:
            _log.warning("mysql statement could not be built for %s", query.query_id)
            raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
        try:
            slot = await pool.acquire_async(remaining)
        except PoolTimeoutError as exc:
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc
        execution = _Execution()
        has_index = query.mapping.text_index is not None
        job = _Job(sql, values, query.query_id, has_index)
        future: Future[list[Any]] = slot.executor.submit(self._run, slot, job, execution)
        # The slot goes back only when its thread is done (KILL settled included), so no
        # later statement can share the connection with this one.
        future.add_done_callback(lambda _: pool.release(slot))
        waiting = asyncio.shield(asyncio.wrap_future(future))
        backstop = budget.remaining() + _GRACE_S
        try:
            return await asyncio.wait_for(waiting, backstop)
        except TimeoutError:
            self._stop(execution, timed_out=True)
            raise ProviderError(ProviderErrorCode.TIMEOUT) from None
        except asyncio.CancelledError:
            self._stop(execution, timed_out=False)
            raise

    def _run(
        self,
        slot: ConnectionSlot[PreparedStatements],
        job: _Job,
        execution: _Execution,
    ) -> list[Any]:
        """Slot-thread body: the bounded SELECT, a read-only autocommit transaction."""
        try:
            if execution.stopped():
                raise ProviderError(self._stop_code(execution))
            try:
                session = slot.connection()
                connection = session.connection
                execution.attach(int(connection.connection_id or 0))
                try:
                    rows = session.fetch_all(job.sql, job.values)
                except Exception:
                    # A failure can leave the exchange unfinished (a result half read):
                    # a ROLLBACK that does not come back clean drops the connection
                    # rather than hand it to the next statement. Only failures pay it.
                    self._end_transaction(slot, connection)
                    raise
            except ProviderError:
                raise
            except Exception as exc:
                execution.settle(self._connect_timeout_s + _GRACE_S)
                raise self._failure(
                    exc, slot, job.query_id, execution.state, job.has_index
                ) from exc
            return rows
        finally:
            execution.settle(self._connect_timeout_s + _GRACE_S)

    @staticmethod
    def _stop_code(execution: _Execution) -> ProviderErrorCode:
        if execution.state.timed_out and not execution.state.cancelled:
            return ProviderErrorCode.TIMEOUT
        return ProviderErrorCode.CANCELLED

    @staticmethod
    def _end_transaction(
        slot: ConnectionSlot[PreparedStatements], connection: MySQLConnection
    ) -> None:
        try:
            connection.rollback()
        except Exception:  # a connection that cannot roll back is dropped
            slot.discard()

    @staticmethod
    def _failure(
        exc: BaseException,
        slot: ConnectionSlot[PreparedStatements],
        query_id: str,
        state: ExecutionState,
        has_index: bool,
    ) -> ProviderError:
        code = classify(exc, has_text_index=has_index, state=state)
        if is_connection_lost(exc):
            slot.discard()
        # Driver text may name tables or echo content: log only, never in the error.
        _log.warning("mysql query %s failed as %s: %s", query_id, code.value, exc)
        return ProviderError(code)

    def _stop(self, execution: _Execution, *, timed_out: bool) -> None:
        """Flag the execution and, if its statement runs, KILL QUERY it from another session."""
        thread_id = execution.request_stop(timed_out=timed_out)
        if thread_id is None:
            return
        threading.Thread(
            target=self._kill_query,
            args=(thread_id, execution),
            name="esra-mysql-kill",
            daemon=True,
        ).start()

    def _kill_query(self, thread_id: int, execution: _Execution) -> None:
        try:
            connection = self._connect()
            try:
                # The server's own connection id, an int: nothing of any query's content.
                connection.cmd_query(f"KILL QUERY {int(thread_id)}")
            finally:
                connection.close()
        except Exception as exc:  # the server-side limit still ends it
            _log.warning("mysql KILL QUERY for connection %s failed: %s", thread_id, exc)
        finally:
            execution.kill_sent()

    # -- health and shutdown -------------------------------------------------------------

    async def readiness(self, mappings: Sequence[Mapping]) -> list[bool]:
        """Whether each mapping's table and FULLTEXT index exist, checked on a slot.

        Raises:
            ProviderError: the template, allowlist, secret or connection codes.
            mysql.connector.Error: a failure of the check's own statements.
        """
        pool, _, _ = await self._ready()
        ready: list[bool] = await self._on_slot(
            pool, lambda slot: self._readiness(slot, mappings), HEALTH_TIMEOUT_S
        )
        return ready

    def _readiness(
        self, slot: ConnectionSlot[PreparedStatements], mappings: Sequence[Mapping]
    ) -> list[bool]:
        connection = slot.connection().connection
        try:
            connection.cmd_query("START TRANSACTION READ ONLY")
            try:
                fetch_all(connection, "SELECT 1")
                return [_mapping_ready(connection, m) for m in mappings]
            finally:
                self._end_transaction(slot, connection)
        except DriverError as exc:
            if is_connection_lost(exc):
                slot.discard()
            raise

    def close(self) -> None:
        self._closed = True
        if self._pool is not None:
            self._pool.close()


class MySqlProvider(SqlSearchProvider[_MySqlEngine]):
    """Searches one MySQL 8 / MariaDB 10.6+ database through FULLTEXT indexes, read-only.

    Args:
        tenant_id: the source's tenant; secrets and the host allowlist are asked with it.
        connection: the source's connection template, e.g.
            ``mysql://esra_reader:${secret:db-pw}@db.internal:3306/sales?ssl_ca=/ca.pem``
            (schemes ``mysql`` and ``mariadb``; options ``ssl_ca``, ``ssl_verify_identity``,
            ``connect_timeout``).
        secrets: resolves ``${secret:NAME}`` references for the tenant.
        allowlist: says whether the tenant may reach the template's host and port.
        mappings: the source's mappings, checked by ``health()``.
        pool_size: connections kept per provider (each execution holds one).
        max_rows: the largest row cap this provider accepts (stated in ``capabilities``).
        connect_timeout_s: socket connect timeout, unless the template sets one.
        cache: compiled-statement cache; a fresh 256-entry LRU by default.

    Its ``builder`` is ``None`` until the first connection has learnt the server, and
    ``render_statement`` raises ``ProviderError(UNKNOWN)`` until then.
    """

    def __init__(
        self,
        *,
        tenant_id: str,
        connection: str,
        secrets: SecretStore,
        allowlist: HostAllowlist,
        mappings: Sequence[Mapping] = (),
        pool_size: int = 4,
        max_rows: int = 200,
        connect_timeout_s: float = 10.0,
        cache: CompiledStatementCache | None = None,
    ) -> None:
        source = SourceConnection(
            connection, tenant_id=tenant_id, secrets=secrets, allowlist=allowlist, schemes=SCHEMES
        )
        engine = _MySqlEngine(
            source, pool_size=pool_size, connect_timeout_s=connect_timeout_s, cache=cache
        )
        super().__init__(
            engine, mappings=mappings, max_rows=max_rows, max_scored_terms=MAX_SCORED_TERMS
        )

    @property
    def server(self) -> ServerInfo | None:
        """The flavour, version and token rules read at first connect (``None`` before)."""
        return self._engine.server

    async def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._engine.close()


def _mapping_ready(connection: MySQLConnection, mapping: Mapping) -> bool:
    """Whether the mapping's table exists and a FULLTEXT index covers its searchable columns."""
    scope = (mapping.schema, mapping.relation)
    ((tables,),) = fetch_all(
        connection,
        "SELECT COUNT(*) FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?",
        scope,
    )
    if not tables:
        return False
    try:
        wanted = fulltext_index_columns(mapping)
    except ValueError:
        return True  # nothing searchable: term-less (RECENT) queries only
    rows = fetch_all(
        connection,
        "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
        "WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? "
        "AND INDEX_TYPE = 'FULLTEXT' ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        scope,
    )
    indexes: dict[str, list[str]] = {}
    for name, column in rows:
        indexes.setdefault(str(name), []).append(str(column))
    if mapping.text_index is not None:
        return tuple(indexes.get(mapping.text_index, ())) == wanted
    return any(tuple(columns) == wanted for columns in indexes.values())
