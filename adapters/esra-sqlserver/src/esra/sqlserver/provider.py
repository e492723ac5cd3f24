"""SqlServerProvider: the ``SearchProvider`` for SQL Server full-text search, via pymssql.

Nothing connects at construction. The first execution resolves the connection template
(``HOST_NOT_ALLOWED`` / ``SECRET_UNRESOLVED`` / ``CONNECTION_TEMPLATE_INVALID`` before any
socket), then each execution takes a pooled connection slot (one pymssql connection pinned
to one worker thread), runs the fencing batch (``esra.sqlserver.session``), the statement
from the shared builder with the ``mssql`` dialect and ``SqlServerFullText``, and always
rolls back. Every pymssql failure leaves as ``ProviderError(code)``; driver text goes to the
log only.

Values never enter the command text: the statement goes to the server as an
``sp_executesql`` remote procedure call (``esra.sqlserver.rpc``) with each value its own RPC
parameter. pymssql's DB-API ``cursor.execute(sql, params)`` — which would substitute escaped
literals into the text on the client — is not used for anything that carries a value.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import attrs
import pymssql
import sqlalchemy as sa
from pymssql import _mssql
from sqlalchemy.dialects import mssql

from esra.core.codes import ProviderErrorCode
from esra.core.config.mapping import FieldType, Mapping, Operator
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
from esra.sql import (
    BuiltStatement,
    CompiledStatementCache,
    ConnectionTarget,
    PinnedRunner,
    SlotPool,
    StatementBuilder,
    resolve_connection,
)
from esra.sqlserver.errors import classify
from esra.sqlserver.fulltext import SqlServerFullText
from esra.sqlserver.rpc import RpcStatement, execute_rpc, rpc_statement
from esra.sqlserver.session import ROLLBACK_SQL, Isolation, session_sql

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
_HEALTH_TIMEOUT_S = 5.0
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


def bindable(value: object) -> object:
    """Make a value bindable as an RPC character parameter.

    Lone surrogates (undecodable input) become U+FFFD and NUL a space: pymssql encodes the
    value as UTF-8 and hands FreeTDS a C string (its length taken by ``strlen``), so either
    would fail or cut the value short. Such a value could never equal stored text anyway.
    """
    if isinstance(value, str):
        value = value.replace("\x00", " ")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


class SqlServerProvider:
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
        self._tenant_id = tenant_id
        self._template = connection
        self._secrets = secrets
        self._allowlist = allowlist
        self._mappings = tuple(mappings)
        self._isolation = Isolation(isolation)
        self._lock_timeout_ms = lock_timeout_ms
        self._login_timeout_s = max(1, int(login_timeout_s))
        self._target: ConnectionTarget | None = None
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
        self._capabilities = ProviderCapabilities(
            strategies=frozenset(Strategy),
            operators=frozenset(Operator),
            text_index=TextIndexKind.SQLSERVER_FULLTEXT,
            max_rows=max_rows,
        )

    @property
    def capabilities(self) -> ProviderCapabilities:
        """All six strategies, every operator, ``TextIndexKind.SQLSERVER_FULLTEXT``."""
        return self._capabilities

    @property
    def builder(self) -> StatementBuilder:
        """The statement builder (exposed for inspection and cache statistics)."""
        return self._builder

    def render_statement(self, query: ValidatedQuery) -> RenderedStatement:
        """The statement ``execute`` sends for ``query``, without its values (for explain)."""
        return self.builder.render(query)

    async def connection_kwargs(self) -> dict[str, Any]:
        """Resolve the template (once) and return ``pymssql.connect`` arguments; no socket.

        Raises:
            ProviderError: ``CONNECTION_TEMPLATE_INVALID``, ``HOST_NOT_ALLOWED`` or
                ``SECRET_UNRESOLVED``.
        """
        if self._target is None:
            self._target = await resolve_connection(
                self._template,
                tenant_id=self._tenant_id,
                secrets=self._secrets,
                allowlist=self._allowlist,
                schemes=SCHEMES,
            )
        return self._connect_kwargs(self._target)

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
        """Open one connection (on a slot's thread; ``connection_kwargs`` resolved it first)."""
        if self._target is None:  # pragma: no cover - every caller resolves the template first
            raise ProviderError(ProviderErrorCode.UNKNOWN)
        return pymssql.connect(**self._connect_kwargs(self._target))

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        """Run ``query`` within ``timeout_s`` seconds and return its rows, best first.

        Raises:
            UnvalidatedQueryError: if the validator did not issue ``query``.
            ProviderError: for every failure, with its classified code.
            asyncio.CancelledError: if the awaiting task is cancelled.
        """
        query = ensure_validated(query)
        try:
            built = self._builder.build(query)
        except Exception as exc:
            _log.warning("sqlserver statement could not be built for %s", query.query_id)
            raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
        try:
            statement = rpc_statement(
                built.sql, {name: bindable(value) for name, value in built.params.items()}
            )
        except (ValueError, TypeError) as exc:
            # Too long for one RPC parameter, or unbindable: refused before anything is sent.
            _log.warning("sqlserver statement could not be bound for %s", query.query_id)
            raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
        await self.connection_kwargs()
        lock_ms = self._lock_timeout_ms
        if lock_ms is None:
            lock_ms = max(1, int(timeout_s * 1000))
        batch = session_sql(lock_timeout_ms=lock_ms, isolation=self._isolation)
        query_timeout = max(1, math.ceil(timeout_s))

        def work(connection: _Connection) -> Sequence[Any]:
            return run_fenced(connection._conn, batch, statement, query_timeout=query_timeout)

        raw = await self._runner.run(work, timeout_s, query.query_id)
        return [_typed_row(built, row, query.mapping) for row in raw]

    async def health(self) -> SourceHealth:
        """``HEALTHY`` if the database answers and every mapping has an active full-text
        index; ``DEGRADED`` when only some do; ``UNAVAILABLE`` otherwise. Never raises."""
        quoted = [_quoted_name(m) for m in self._mappings]

        def work(connection: _Connection) -> list[Any]:
            probes = [rpc_statement(FULLTEXT_INDEX_SQL, {"name": name}) for name in quoted]
            mssql_conn = connection._conn
            mssql_conn.execute_non_query(HEALTH_PROBE_SQL)
            ready = []
            for probe in probes:
                rows = execute_rpc(mssql_conn, probe)
                ready.append(bool(rows and rows[0][0] == 1))
            return ready

        try:
            await self.connection_kwargs()
            ready = await self._runner.run(work, _HEALTH_TIMEOUT_S, "health")
        except ProviderError as exc:
            _log.warning("sqlserver health check failed as %s", exc.code.value)
            return SourceHealth.UNAVAILABLE
        except Exception:
            _log.exception("sqlserver health check failed unexpectedly")
            return SourceHealth.UNAVAILABLE
        if all(ready):
            return SourceHealth.HEALTHY
        return SourceHealth.DEGRADED if any(ready) else SourceHealth.UNAVAILABLE

    async def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._pool.close()


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
    table = sa.table(mapping.relation, schema=mapping.schema)
    return str(sqlserver_dialect().identifier_preparer.format_table(table))


def _typed_row(built: BuiltStatement, raw: Sequence[Any], mapping: Mapping) -> ResultRow:
    """Map a driver row, returning DATE fields as dates (``datetime`` columns included)."""
    row = built.to_row(raw)
    dates = {f.name for f in mapping.fields if f.type is FieldType.DATE}
    values = dict(row.values)
    changed = False
    for name in dates & set(values):
        value = values[name]
        if isinstance(value, datetime):
            values[name] = value.date()
            changed = True
        elif isinstance(value, date):
            continue
    return attrs.evolve(row, values=values) if changed else row
