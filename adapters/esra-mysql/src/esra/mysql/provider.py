"""MySqlProvider: the ``SearchProvider`` over MySQL 8 / MariaDB 10.6+ FULLTEXT, via PyMySQL.

Nothing connects at construction. On first use the source's connection template is resolved
(``esra.sql.resolve_connection``: template check, host allowlist, then secrets — all before
any socket), a per-provider pool is made, and the first connection reads the server's flavour
and full-text token rules.

Every execution refuses anything the validator did not issue, builds (or reuses) the shared
SQLAlchemy statement, and runs it on a pooled connection on that connection's own worker
thread, as ``START TRANSACTION READ ONLY`` → the bounded SELECT → ``ROLLBACK``. The session is
also ``SET SESSION TRANSACTION READ ONLY`` at connect; the current database is the template's
and never changes (a mapping's ``schema`` qualifies its table). The statement carries a
server-side time limit (see ``esra.mysql.server``); a client-side backstop one second later,
or cancellation of the awaiting task, sends ``KILL QUERY <connection id>`` from a separate
connection. Every driver failure leaves as ``ProviderError(code)``; its text goes to the log.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import attrs
import pymysql

from esra.core.codes import ProviderErrorCode
from esra.core.config.mapping import Mapping, Operator
from esra.core.config.source import SourceHealth
from esra.core.exceptions import ProviderError
from esra.core.ports import (
    HostAllowlist,
    ProviderCapabilities,
    RenderedStatement,
    SecretStore,
    TextIndexKind,
)
from esra.core.query import ResultRow, Strategy
from esra.core.validation import ValidatedQuery, ensure_validated
from esra.mysql._quote import DIALECT
from esra.mysql.errors import ExecutionState, classify, is_connection_lost
from esra.mysql.fulltext import MatchAgainstFullText
from esra.mysql.index import fulltext_index_columns
from esra.mysql.server import ServerInfo, detect_server, with_timeout
from esra.sql import (
    CompiledStatementCache,
    ConnectionSlot,
    ConnectionTarget,
    ConnectionTemplate,
    PoolTimeoutError,
    SlotPool,
    StatementBuilder,
    resolve_connection,
)

__all__ = ["SCHEMES", "TEMPLATE_OPTIONS", "MySqlProvider"]

_log = logging.getLogger("esra.mysql")

SCHEMES: dict[str, int] = {"mysql": 3306, "mariadb": 3306}
# Query options a connection template may carry; anything else is CONNECTION_TEMPLATE_INVALID.
TEMPLATE_OPTIONS = frozenset({"ssl_ca", "ssl_verify_identity", "connect_timeout"})

_GRACE_S = 1.0
_HEALTH_TIMEOUT_S = 5.0
_TRUE = frozenset({"1", "true", "yes", "on"})


@attrs.frozen
class _Job:
    """What a slot's thread runs: bounded command text, its values, and how to classify."""

    sql: str
    params: dict[str, object]
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


def _encodable(value: object) -> object:
    """Make a ``str`` encodable: lone surrogates (undecodable input) become U+FFFD.

    The connection speaks utf8mb4, so such a value could never equal stored text anyway; the
    replacement keeps it a literal instead of failing the encode.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


class MySqlProvider:
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
        if pool_size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        self._tenant_id = tenant_id
        self._template = connection
        self._secrets = secrets
        self._allowlist = allowlist
        self._mappings = tuple(mappings)
        self._pool_size = pool_size
        self._connect_timeout_s = connect_timeout_s
        self._cache = cache if cache is not None else CompiledStatementCache()
        self._capabilities = ProviderCapabilities(
            strategies=frozenset(Strategy),
            operators=frozenset(Operator),
            text_index=TextIndexKind.MYSQL_FULLTEXT,
            max_rows=max_rows,
        )
        self._target: ConnectionTarget | None = None
        self._pool: SlotPool[Any] | None = None
        self._server: ServerInfo | None = None
        self._builder: StatementBuilder | None = None
        self._closed = False
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @property
    def capabilities(self) -> ProviderCapabilities:
        """All six strategies, every operator, ``TextIndexKind.MYSQL_FULLTEXT``."""
        return self._capabilities

    @property
    def server(self) -> ServerInfo | None:
        """The flavour, version and token rules read at first connect (``None`` before)."""
        return self._server

    @property
    def builder(self) -> StatementBuilder | None:
        """The statement builder, once the server is known (for inspection and statistics)."""
        return self._builder

    def render_statement(self, query: ValidatedQuery) -> RenderedStatement:
        """The statement ``execute`` sends for ``query``, without its values (for explain).

        Raises:
            ProviderError: ``UNKNOWN`` before the first connection: the statement depends
                on the server's flavour, learnt then.
        """
        if self._builder is None:
            raise ProviderError(ProviderErrorCode.UNKNOWN)
        return self._builder.render(query)

    # -- setup ---------------------------------------------------------------------------

    def _ready_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def _ready(self) -> tuple[SlotPool[Any], ServerInfo, StatementBuilder]:
        """Resolve the template, make the pool and learn the server, once.

        Raises:
            ProviderError: the template, allowlist and secret codes, or the classified
                failure of the first connection.
        """
        async with self._ready_lock():
            if self._closed:
                raise ProviderError(ProviderErrorCode.UNKNOWN)
            if self._pool is None:
                self._target = await self._resolve()
                self._pool = SlotPool(self._connect, size=self._pool_size, thread_name="esra-mysql")
            if self._server is None or self._builder is None:
                server = await self._on_slot(self._pool, self._detect, timeout_s=None)
                self._builder = StatementBuilder(
                    DIALECT, MatchAgainstFullText(server.rules), cache=self._cache
                )
                self._server = server
                _log.info("mysql source is %s %s", server.flavor.value, server.version)
            return self._pool, self._server, self._builder

    async def _resolve(self) -> ConnectionTarget:
        parsed = ConnectionTemplate.parse(self._template, schemes=SCHEMES)
        if any(key not in TEMPLATE_OPTIONS for key, _ in parsed.options):
            _log.warning("mysql connection template has an unsupported option")
            raise ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
        target = await resolve_connection(
            self._template,
            tenant_id=self._tenant_id,
            secrets=self._secrets,
            allowlist=self._allowlist,
            schemes=SCHEMES,
        )
        timeout = target.option("connect_timeout")
        if timeout is not None and not timeout.isdigit():
            raise ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
        return target

    def _connect(self) -> Any:
        """Open one read-only session (runs on a slot's thread or the killer's)."""
        target = self._target
        if target is None:  # pragma: no cover - _ready sets it before any slot exists
            raise ProviderError(ProviderErrorCode.UNKNOWN)
        timeout = target.option("connect_timeout")
        ssl_ca = target.option("ssl_ca")
        connection = pymysql.connect(
            host=target.host,
            port=target.port,
            user=target.user,
            password=target.password,
            database=target.database or None,
            charset="utf8mb4",
            connect_timeout=int(timeout) if timeout else self._connect_timeout_s,
            autocommit=True,
            local_infile=False,
            client_flag=0,  # never CLIENT.MULTI_STATEMENTS
            ssl_ca=ssl_ca,
            ssl_verify_identity=(target.option("ssl_verify_identity", "") or "").lower() in _TRUE,
        )
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION TRANSACTION READ ONLY")
        except BaseException:
            connection.close()
            raise
        return connection

    def _detect(self, slot: ConnectionSlot[Any]) -> ServerInfo:
        try:
            return detect_server(slot.connection())
        except pymysql.err.MySQLError as exc:
            raise self._failure(exc, slot, "connect", ExecutionState(), True) from exc

    async def _on_slot(self, pool: SlotPool[Any], work: Any, timeout_s: float | None) -> Any:
        """Run ``work(slot)`` on a slot's thread; the slot returns when the work ends."""
        try:
            slot = await pool.acquire_async(_HEALTH_TIMEOUT_S if timeout_s is None else timeout_s)
        except PoolTimeoutError as exc:
            raise ProviderError(ProviderErrorCode.RESOURCE_EXHAUSTED) from exc
        future = slot.executor.submit(work, slot)
        future.add_done_callback(lambda _: pool.release(slot))
        return await asyncio.wrap_future(future)

    # -- execution -----------------------------------------------------------------------

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        """Run ``query`` within ``timeout_s`` seconds and return its rows, best first.

        Raises:
            UnvalidatedQueryError: if the validator did not issue ``query``.
            ProviderError: for every failure, with its classified code.
            asyncio.CancelledError: if the awaiting task is cancelled (the statement is
                killed server-side first).
        """
        query = ensure_validated(query)
        deadline = time.monotonic() + timeout_s
        pool, server, builder = await self._ready()
        try:
            built = builder.build(query)
            remaining = max(deadline - time.monotonic(), 0.0)
            sql = with_timeout(built.sql, server.flavor, remaining)
        except Exception as exc:
            _log.warning("mysql statement could not be built for %s", query.query_id)
            raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
        params = {name: _encodable(value) for name, value in built.params.items()}
        try:
            slot = await pool.acquire_async(remaining)
        except PoolTimeoutError as exc:
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc
        execution = _Execution()
        has_index = query.mapping.text_index is not None
        job = _Job(sql, params, query.query_id, has_index)
        future: Future[list[Any]] = slot.executor.submit(self._run, slot, job, execution)
        # The slot goes back only when its thread is done (KILL settled included), so no
        # later statement can share the connection with this one.
        future.add_done_callback(lambda _: pool.release(slot))
        waiting = asyncio.shield(asyncio.wrap_future(future))
        backstop = max(deadline - time.monotonic(), 0.0) + _GRACE_S
        try:
            raw = await asyncio.wait_for(waiting, backstop)
        except TimeoutError:
            self._stop(execution, timed_out=True)
            raise ProviderError(ProviderErrorCode.TIMEOUT) from None
        except asyncio.CancelledError:
            self._stop(execution, timed_out=False)
            raise
        return [built.to_row(row) for row in raw]

    def _run(
        self,
        slot: ConnectionSlot[Any],
        job: _Job,
        execution: _Execution,
    ) -> list[Any]:
        """Slot-thread body: one read-only transaction around the bounded SELECT."""
        try:
            if execution.stopped():
                raise ProviderError(self._stop_code(execution))
            try:
                connection = slot.connection()
                execution.attach(connection.thread_id())
                with connection.cursor() as cursor:
                    cursor.execute("START TRANSACTION READ ONLY")
                    try:
                        if execution.stopped():
                            raise ProviderError(self._stop_code(execution))
                        cursor.execute(job.sql, job.params)
                        rows = list(cursor.fetchall())
                    finally:
                        self._end_transaction(slot, connection)
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
    def _end_transaction(slot: ConnectionSlot[Any], connection: Any) -> None:
        try:
            connection.rollback()
        except Exception:  # a connection that cannot roll back is dropped
            slot.discard()

    @staticmethod
    def _failure(
        exc: BaseException,
        slot: ConnectionSlot[Any],
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
                with connection.cursor() as cursor:
                    cursor.execute("KILL QUERY %(id)s", {"id": int(thread_id)})
            finally:
                connection.close()
        except Exception as exc:  # the server-side limit still ends it
            _log.warning("mysql KILL QUERY for connection %s failed: %s", thread_id, exc)
        finally:
            execution.kill_sent()

    # -- health and shutdown -------------------------------------------------------------

    async def health(self) -> SourceHealth:
        """``HEALTHY`` if the server answers and every mapping's table and FULLTEXT index exist.

        ``DEGRADED`` when only some mappings are ready, ``UNAVAILABLE`` when the server cannot
        be used or no mapping is. Never raises.
        """
        try:
            pool, _, _ = await self._ready()
            ready: list[bool] = await self._on_slot(pool, self._health, _HEALTH_TIMEOUT_S)
        except Exception as exc:  # health reports, it never raises
            _log.warning("mysql health check failed: %r", exc)
            return SourceHealth.UNAVAILABLE
        if all(ready):
            return SourceHealth.HEALTHY
        return SourceHealth.DEGRADED if any(ready) else SourceHealth.UNAVAILABLE

    def _health(self, slot: ConnectionSlot[Any]) -> list[bool]:
        connection = slot.connection()
        try:
            with connection.cursor() as cursor:
                cursor.execute("START TRANSACTION READ ONLY")
                try:
                    cursor.execute("SELECT 1")
                    cursor.fetchall()
                    return [_mapping_ready(cursor, m) for m in self._mappings]
                finally:
                    self._end_transaction(slot, connection)
        except pymysql.err.MySQLError as exc:
            if is_connection_lost(exc):
                slot.discard()
            raise

    async def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._closed = True
        if self._pool is not None:
            self._pool.close()


def _mapping_ready(cursor: Any, mapping: Mapping) -> bool:
    """Whether the mapping's table exists and a FULLTEXT index covers its searchable columns."""
    scope = {"schema": mapping.schema, "table": mapping.relation}
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = COALESCE(%(schema)s, DATABASE()) AND TABLE_NAME = %(table)s",
        scope,
    )
    if not cursor.fetchone()[0]:
        return False
    try:
        wanted = fulltext_index_columns(mapping)
    except ValueError:
        return True  # nothing searchable: term-less (RECENT) queries only
    cursor.execute(
        "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
        "WHERE TABLE_SCHEMA = COALESCE(%(schema)s, DATABASE()) AND TABLE_NAME = %(table)s "
        "AND INDEX_TYPE = 'FULLTEXT' ORDER BY INDEX_NAME, SEQ_IN_INDEX",
        scope,
    )
    indexes: dict[str, list[str]] = {}
    for name, column in cursor.fetchall():
        indexes.setdefault(str(name), []).append(str(column))
    if mapping.text_index is not None:
        return tuple(indexes.get(mapping.text_index, ())) == wanted
    return any(tuple(columns) == wanted for columns in indexes.values())
