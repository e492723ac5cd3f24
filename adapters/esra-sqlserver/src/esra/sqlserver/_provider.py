"""SqlServerProvider: the ``SearchProvider`` for SQL Server full-text search, via pymssql.

Nothing connects at construction. The first execution resolves the connection template
(``HOST_NOT_ALLOWED`` / ``SECRET_UNRESOLVED`` / ``CONNECTION_TEMPLATE_INVALID`` before any
socket), then each execution takes a pooled connection slot (one pymssql connection pinned
to one worker thread), runs the fencing batch (``esra.sqlserver._session``), the statement
from the shared builder with the ``mssql`` dialect and ``SqlServerFullText``, and always
rolls back. Every pymssql failure leaves as ``ProviderError(code)``; driver text goes to the
log only. The flow every SQL engine shares (refusal, build, row mapping, health verdict) is
``esra.sql.SqlSearchProvider``'s; what is SQL Server's own is the part below.

Values never enter the command text: the statement goes to the server as an
``sp_executesql`` remote procedure call (``esra.sqlserver._rpc``) with each value its own RPC
parameter. pymssql's DB-API ``cursor.execute(sql, params)`` — which would substitute escaped
literals into the text on the client — is not used for anything that carries a value.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from typing import Any

import pymssql
import sqlalchemy as sa
from pymssql import _mssql
from sqlalchemy.dialects import mssql

from esra.core.codes import ProviderErrorCode
from esra.core.config import Mapping
from esra.core.exceptions import ProviderError
from esra.core.ports import HostAllowlist, SecretStore, TextIndexKind
from esra.core.providers import ValidatedQuery
from esra.sql import (
    HEALTH_TIMEOUT_S,
    BuiltStatement,
    CompiledStatementCache,
    ConnectionTarget,
    EngineTraits,
    PinnedRunner,
    SlotPool,
    SourceConnection,
    SqlSearchProvider,
    StatementBuilder,
    TimeBudget,
    schema_identifier,
)
from esra.sqlserver._errors import classify
from esra.sqlserver._fulltext import SqlServerFullText
from esra.sqlserver._rendering import (
    MAX_COMMAND_UNITS,
    MAX_TEXT_CONDITION_UNITS,
    SqlServerTextRendering,
)
from esra.sqlserver._rpc import RpcStatement, bindable, execute_rpc, rpc_statement
from esra.sqlserver._session import ROLLBACK_SQL, Isolation, session_sql
from esra.sqlserver._values import rpc_values

__all__ = [
    "FULLTEXT_INDEX_SQL",
    "HEALTH_PROBE_SQL",
    "SCHEMES",
    "SqlServerProvider",
    "bindable",
    "sqlserver_dialect",
]

_log = logging.getLogger("esra.sqlserver")

SCHEMES = {"mssql": 1433, "sqlserver": 1433}
_OPTIONS = frozenset({"tds_version", "encryption", "application_intent"})
HEALTH_PROBE_SQL = "SELECT 1"
FULLTEXT_INDEX_SQL = "SELECT OBJECTPROPERTYEX(OBJECT_ID(%(name)s), 'TableHasActiveFulltextIndex')"
_Connection = Any  # pymssql.Connection[Any]; pymssql's generic stubs add nothing here
_DRIVER_ERRORS = (pymssql.Error, _mssql.MSSQLException)


def sqlserver_dialect() -> sa.engine.Dialect:
    """The ``mssql`` dialect as pymssql needs it: ``pyformat`` binds, SQL Server 2012+ syntax.

    Declaring a 2012+ server makes the row cap ``OFFSET 0 ROWS FETCH FIRST %(lim)s ROWS
    ONLY`` after the ``ORDER BY`` (a bound value) instead of a ``ROW_NUMBER()`` wrapper.
    """
    dialect: Any = mssql.dialect(paramstyle="pyformat")  # type: ignore[no-untyped-call]
    dialect.server_version_info = (16, 0)
    dialect._setup_version_attributes()  # what connecting to a 2012+ server would have done
    return dialect  # type: ignore[no-any-return]


class _SqlServerEngine:
    """The SQL Server part of the provider: pymssql connections pinned to threads, the
    fencing batch and the ``sp_executesql`` RPC around every statement."""

    traits = EngineTraits(
        name="sqlserver", text_index=TextIndexKind.SQLSERVER_FULLTEXT, dates_as_datetimes=True
    )

    def __init__(
        self,
        connection: SourceConnection,
        *,
        pool_size: int,
        isolation: Isolation,
        lock_timeout_ms: int | None,
        login_timeout_s: int,
        cache: CompiledStatementCache | None,
    ) -> None:
        self._connection = connection
        self._isolation = Isolation(isolation)
        self._lock_timeout_ms = lock_timeout_ms
        self._login_timeout_s = max(1, int(login_timeout_s))
        self._pool: SlotPool[_Connection] = SlotPool(
            self._open, size=pool_size, thread_name="esra-sqlserver"
        )
        # pymssql cannot safely cancel from another thread (no ``interrupt``): the driver's
        # query timeout (whole seconds) ends the statement, and the abandoned slot's
        # connection is closed behind it; the outer deadline allows it a second to fire.
        self._runner = PinnedRunner(
            self._pool,
            engine="sqlserver",
            log=_log,
            driver_errors=_DRIVER_ERRORS,
            classify=classify,
            grace_s=1.0,
        )
        self._builder = StatementBuilder(sqlserver_dialect(), SqlServerFullText(), cache=cache)

    @property
    def builder(self) -> StatementBuilder:
        return self._builder

    async def statement_builder(self) -> StatementBuilder:
        return self._builder

    async def connection_kwargs(self) -> dict[str, Any]:
        return self._connect_kwargs(await self._connection.target())

    def _connect_kwargs(self, target: ConnectionTarget) -> dict[str, Any]:
        unknown = {key for key, _ in target.options} - _OPTIONS
        if unknown or not target.database:
            error = ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
            error.add_note("unknown option or no database name")
            raise error
        kwargs: dict[str, Any] = {
            "server": target.host,
            "port": str(target.port),
            "user": target.user,
            "password": target.password,
            "database": target.database,
            "login_timeout": self._login_timeout_s,
            "autocommit": True,  # the fencing batch opens the transaction itself
            "appname": "esra",
            "charset": "UTF-8",
        }
        for name in ("tds_version", "encryption"):
            value = target.option(name)
            if value is not None:
                kwargs[name] = value
        if (target.option("application_intent") or "").lower() == "readonly":
            kwargs["read_only"] = True
        return kwargs

    def _open(self) -> _Connection:
        """Open one connection on a slot's thread, its template resolved anew (a rotated
        secret is what it logs in with; ``connection_kwargs`` checked the template first)."""
        return pymssql.connect(**self._connect_kwargs(self._connection.resolve_from_thread()))

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> Sequence[Any]:
        """Bind the statement as an RPC, then run it fenced on a slot's thread."""
        try:
            statement = rpc_statement(built.sql, rpc_values(built, query))
        except (ValueError, TypeError) as exc:
            # Too long for one RPC parameter, or unbindable: refused before anything is sent.
            # SYNTAX_ERROR, the statement cannot run as built: the query's fault, never the
            # source's, so it does not count against the source's breaker.
            _log.warning("sqlserver statement could not be bound for %s", query.query_id)
            raise ProviderError(ProviderErrorCode.SYNTAX_ERROR) from exc
        await self.connection_kwargs()
        timeout_s = budget.seconds
        lock_ms = self._lock_timeout_ms
        if lock_ms is None:
            lock_ms = max(1, int(timeout_s * 1000))
        batch = session_sql(lock_timeout_ms=lock_ms, isolation=self._isolation)
        query_timeout = max(1, math.ceil(timeout_s))

        def work(connection: _Connection) -> Sequence[Any]:
            return run_fenced(connection._conn, batch, statement, query_timeout=query_timeout)

        return await self._runner.run(work, timeout_s, query.query_id)

    async def readiness(self, mappings: Sequence[Mapping]) -> list[bool]:
        """Probe the database, then ask whether each mapping has an active full-text index."""
        quoted = [_quoted_name(m) for m in mappings]

        def work(connection: _Connection) -> list[bool]:
            probes = [rpc_statement(FULLTEXT_INDEX_SQL, {"name": name}) for name in quoted]
            mssql_conn = connection._conn
            mssql_conn.execute_non_query(HEALTH_PROBE_SQL)
            ready = []
            for probe in probes:
                rows = execute_rpc(mssql_conn, probe)
                ready.append(bool(rows and rows[0][0] == 1))
            return ready

        await self.connection_kwargs()
        return await self._runner.run(work, HEALTH_TIMEOUT_S, "health")

    def close(self) -> None:
        self._pool.close()


class SqlServerProvider(SqlSearchProvider[_SqlServerEngine]):
    """Searches one SQL Server database through full-text indexes, read-only by three fences.

    Args:
        tenant_id: the source's tenant (secrets and the host allowlist are checked with it).
        connection: the source's connection template, e.g.
            ``mssql://esra_reader:${secret:sales-db}@sql.internal:1433/sales?encryption=require``
            (options: ``tds_version``, ``encryption``, ``application_intent=readonly``).
        secrets: resolves ``${secret:...}`` references for ``tenant_id``.
        allowlist: decides whether the host and port may be reached for ``tenant_id``.
        mappings: the source's mappings, checked by ``health()``.
        pool_size: connections kept (each execution holds one).
        max_rows: the largest row cap this provider accepts.
        isolation: ``Isolation.READ_COMMITTED`` (default) or ``Isolation.SNAPSHOT``.
        lock_timeout_ms: ``SET LOCK_TIMEOUT`` value; the execution's timeout when ``None``.
        login_timeout_s: seconds to wait for a connection to open.
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
        isolation: Isolation = Isolation.READ_COMMITTED,
        lock_timeout_ms: int | None = None,
        login_timeout_s: int = 10,
        cache: CompiledStatementCache | None = None,
    ) -> None:
        source = SourceConnection(
            connection, tenant_id=tenant_id, secrets=secrets, allowlist=allowlist, schemes=SCHEMES
        )
        engine = _SqlServerEngine(
            source,
            pool_size=pool_size,
            isolation=isolation,
            lock_timeout_ms=lock_timeout_ms,
            login_timeout_s=login_timeout_s,
            cache=cache,
        )
        super().__init__(
            engine,
            mappings=mappings,
            max_rows=max_rows,
            rendering=SqlServerTextRendering(engine.builder),
            max_text_condition_length=MAX_TEXT_CONDITION_UNITS,
            max_command_length=MAX_COMMAND_UNITS,
        )

    async def connection_kwargs(self) -> dict[str, Any]:
        """Resolve the template (once) and return ``pymssql.connect`` arguments; no socket.

        Raises:
            ProviderError: ``CONNECTION_TEMPLATE_INVALID``, ``HOST_NOT_ALLOWED`` or
                ``SECRET_UNRESOLVED``.
        """
        return await self._engine.connection_kwargs()

    async def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._engine.close()


def run_fenced(
    connection: Any, batch: str, statement: RpcStatement, *, query_timeout: int
) -> Sequence[Any]:
    """Run ``statement`` on an ``_mssql.MSSQLConnection`` inside the fencing transaction.

    The fencing batch (``SET LOCK_TIMEOUT``, isolation, ``BEGIN TRANSACTION``) holds no
    value; the statement goes as an ``sp_executesql`` RPC; the transaction is always rolled
    back, whether the statement succeeded or not.
    """
    connection.query_timeout = query_timeout  # FreeTDS sends an attention when it expires
    try:
        connection.execute_non_query(batch)
        rows = execute_rpc(connection, statement)
    except BaseException:
        # The statement's own failure is the one to classify; a rollback that fails behind
        # it (a dead connection) must not replace it. The next use's rollback still ends
        # any transaction left open, as ``IF @@TRANCOUNT > 0`` rolls back every level.
        with contextlib.suppress(*_DRIVER_ERRORS):
            connection.execute_non_query(ROLLBACK_SQL)
        raise
    connection.execute_non_query(ROLLBACK_SQL)
    return rows


def _quoted_name(mapping: Mapping) -> str:
    preparer = sqlserver_dialect().identifier_preparer
    table = sa.table(mapping.relation, schema=schema_identifier(mapping.schema, preparer))
    return str(preparer.format_table(table))
