"""OracleTextProvider: the ``SearchProvider`` for Oracle Text, via python-oracledb thin mode.

Nothing connects at construction. The first execution resolves the connection template
(``HOST_NOT_ALLOWED`` / ``SECRET_UNRESOLVED`` / ``CONNECTION_TEMPLATE_INVALID`` before any
socket). Each execution takes a pooled slot (one synchronous thin connection pinned to one
worker thread), then:

1. ``SET TRANSACTION READ ONLY`` — first, so the whole transaction can write nothing;
2. the statement from the shared builder (``oracle`` dialect, ``OracleTextFullText``), its
   values as real server-side binds, ``call_timeout`` set to the remaining time for every
   round trip;
3. ``ROLLBACK`` to end the read-only transaction.

``ALTER SESSION SET CURRENT_SCHEMA`` runs once per connection, from configuration only, as a
quoted identifier. An outer asyncio deadline covers what ``call_timeout`` (per round trip)
cannot; at that deadline, or on cancellation, ``Connection.cancel()`` breaks the running
statement from the event-loop thread and the slot is discarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence
from datetime import date
from typing import Any

import oracledb

from esra.core.codes import ProviderErrorCode
from esra.core.config import FieldType, Mapping
from esra.core.exceptions import ProviderError
from esra.core.ports import HostAllowlist, SecretStore, TextIndexKind
from esra.core.providers import ResolvedFilter, ValidatedQuery, predicate_values
from esra.oracle._errors import classify
from esra.oracle._fulltext import OracleTextFullText
from esra.oracle._identifiers import is_oracle_identifier, oracle_dialect
from esra.oracle._rendering import MAX_TEXT_QUERY_BYTES, OracleTextRendering
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
    filter_bind_name,
    predicate_bind_name,
)
from esra.sql import utf8_bindable as bindable  # lone surrogates become U+FFFD

__all__ = [
    "HEALTH_PROBE_SQL",
    "READ_ONLY_SQL",
    "SCHEMES",
    "TEXT_INDEX_HEALTH_SQL",
    "OracleTextProvider",
    "bindable",
    "current_schema_sql",
    "oracle_dialect",
]

_log = logging.getLogger("esra.oracle")

SCHEMES = {"oracle": 1521}
READ_ONLY_SQL = "SET TRANSACTION READ ONLY"
_OPTIONS = frozenset({"protocol"})
HEALTH_PROBE_SQL = "SELECT 1 FROM DUAL"
# Whether a mapping's CONTEXT index exists and is usable (names bound, never spliced).
TEXT_INDEX_HEALTH_SQL = (
    "SELECT COUNT(*) FROM ALL_INDEXES WHERE INDEX_NAME = :idx"
    " AND OWNER = COALESCE(:owner, SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA'))"
    " AND ITYP_NAME = 'CONTEXT' AND DOMIDX_STATUS = 'VALID'"
    " AND DOMIDX_OPSTATUS = 'VALID'"
)


def current_schema_sql(schema: str) -> str:
    """Return ``ALTER SESSION SET CURRENT_SCHEMA = "<SCHEMA>"`` for a configured schema.

    The name follows SQLAlchemy's Oracle convention (an all-lowercase name means the
    case-insensitive, i.e. upper-case, identifier) and is always double-quoted.

    Raises:
        ValueError: for a name Oracle cannot have (empty, over 128 bytes, ``"`` or NUL).
    """
    if not schema or not is_oracle_identifier(schema) or len(schema.encode()) > 128:
        msg = "invalid schema name"
        raise ValueError(msg)
    dialect: Any = oracle_dialect()
    name = dialect.denormalize_name(schema)
    quoted = dialect.identifier_preparer.quote_identifier(name)
    return f"ALTER SESSION SET CURRENT_SCHEMA = {quoted}"


def _lobs_as_text(cursor: Any, metadata: Any) -> Any:
    """Fetch CLOB/NCLOB columns as ``str`` rather than LOB locators."""
    if metadata.type_code is oracledb.DB_TYPE_CLOB:
        return cursor.var(oracledb.DB_TYPE_LONG, arraysize=cursor.arraysize)
    if metadata.type_code is oracledb.DB_TYPE_NCLOB:
        return cursor.var(oracledb.DB_TYPE_LONG_NVARCHAR, arraysize=cursor.arraysize)
    return None


class _OracleEngine:
    """The Oracle part of the provider: thin connections pinned to threads, a read-only
    transaction around every statement, ``call_timeout`` and ``Connection.cancel()``."""

    traits = EngineTraits(
        name="oracle", text_index=TextIndexKind.ORACLE_TEXT, dates_as_datetimes=True
    )

    def __init__(
        self,
        connection: SourceConnection,
        *,
        pool_size: int,
        current_schema: str | None,
        connect_timeout_s: float,
        cache: CompiledStatementCache | None,
    ) -> None:
        self._connection = connection
        self._schema_sql = current_schema_sql(current_schema) if current_schema else None
        self._connect_timeout_s = connect_timeout_s
        self._pool: SlotPool[oracledb.Connection] = SlotPool(
            self._open, size=pool_size, thread_name="esra-oracle"
        )
        # call_timeout fires first per round trip; the outer deadline (0.5 s later) bounds
        # the sum of them, and then Connection.cancel() breaks the statement server-side.
        self._runner = PinnedRunner(
            self._pool,
            engine="oracle",
            log=_log,
            driver_errors=(oracledb.Error,),
            classify=classify,
            grace_s=0.5,
            interrupt=_cancel,
        )
        self._builder = StatementBuilder(oracle_dialect(), OracleTextFullText(), cache=cache)

    @property
    def builder(self) -> StatementBuilder:
        return self._builder

    async def statement_builder(self) -> StatementBuilder:
        return self._builder

    async def connection_kwargs(self) -> dict[str, Any]:
        return self._connect_kwargs(await self._connection.target())

    def _connect_kwargs(self, target: ConnectionTarget) -> dict[str, Any]:
        protocol = (target.option("protocol") or "tcp").lower()
        unknown = {key for key, _ in target.options} - _OPTIONS
        if unknown or not target.database or protocol not in {"tcp", "tcps"}:
            error = ProviderError(ProviderErrorCode.CONNECTION_TEMPLATE_INVALID)
            error.add_note("unknown option, bad protocol or no service name")
            raise error
        return {
            "user": target.user,
            "password": target.password,
            "host": target.host,
            "port": target.port,
            "service_name": target.database,
            "protocol": protocol,
            "tcp_connect_timeout": self._connect_timeout_s,
        }

    def _open(self) -> oracledb.Connection:
        """Open one connection and set its current schema, on a slot's thread, its template
        resolved anew (``connection_kwargs`` checked the template first)."""
        connection = oracledb.connect(
            **self._connect_kwargs(self._connection.resolve_from_thread())
        )
        connection.outputtypehandler = _lobs_as_text
        if self._schema_sql is not None:
            connection.cursor().execute(self._schema_sql)
        return connection

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> list[Any]:
        """Run the statement in a read-only transaction, every round trip time-limited."""
        params = bind_params(built, query)
        await self.connection_kwargs()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget.seconds

        def work(connection: oracledb.Connection) -> list[Any]:
            remaining = max(deadline - loop.time(), 0.001)
            connection.call_timeout = max(1, math.ceil(remaining * 1000))
            cursor = connection.cursor()
            try:
                cursor.execute(READ_ONLY_SQL)
                cursor.execute(built.sql, params)
                return list(cursor.fetchall())
            finally:
                connection.rollback()

        return await self._runner.run(work, budget.seconds, query.query_id)

    async def readiness(self, mappings: Sequence[Mapping]) -> list[bool]:
        """Probe the database, then ask whether each mapping's CONTEXT index is valid."""
        dialect: Any = oracle_dialect()
        checks = [
            (
                dialect.denormalize_name(m.text_index or ""),
                dialect.denormalize_name(m.schema) if m.schema else None,
            )
            for m in mappings
        ]

        def work(connection: oracledb.Connection) -> list[bool]:
            cursor = connection.cursor()
            cursor.execute(HEALTH_PROBE_SQL)
            cursor.fetchall()
            ready = []
            for index, owner in checks:
                cursor.execute(TEXT_INDEX_HEALTH_SQL, {"idx": index, "owner": owner})
                row = cursor.fetchone()
                ready.append(bool(row and row[0]))
            connection.rollback()
            return ready

        await self.connection_kwargs()
        return await self._runner.run(work, HEALTH_TIMEOUT_S, "health")

    def close(self) -> None:
        self._pool.close()


class OracleTextProvider(SqlSearchProvider[_OracleEngine]):
    """Searches one Oracle database through Oracle Text CONTEXT indexes, read-only.

    Args:
        tenant_id: the source's tenant (secrets and the host allowlist are checked with it).
        connection: the source's connection template, e.g.
            ``oracle://esra_reader:${secret:hr-db}@ora.internal:1521/HRPDB?protocol=tcps``
            (the path is the service name; option ``protocol`` = ``tcp`` or ``tcps``).
        secrets: resolves ``${secret:...}`` references for ``tenant_id``.
        allowlist: decides whether the host and port may be reached for ``tenant_id``.
        mappings: the source's mappings, checked by ``health()``.
        pool_size: connections kept (each execution holds one).
        max_rows: the largest row cap this provider accepts.
        current_schema: the schema unqualified names resolve in (configuration only).
        connect_timeout_s: seconds to wait for a TCP connection.
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
        current_schema: str | None = None,
        connect_timeout_s: float = 10.0,
        cache: CompiledStatementCache | None = None,
    ) -> None:
        source = SourceConnection(
            connection, tenant_id=tenant_id, secrets=secrets, allowlist=allowlist, schemes=SCHEMES
        )
        engine = _OracleEngine(
            source,
            pool_size=pool_size,
            current_schema=current_schema,
            connect_timeout_s=connect_timeout_s,
            cache=cache,
        )
        super().__init__(
            engine,
            mappings=mappings,
            max_rows=max_rows,
            rendering=OracleTextRendering(engine.builder),
            max_text_condition_length=MAX_TEXT_QUERY_BYTES,
        )

    async def connection_kwargs(self) -> dict[str, Any]:
        """Resolve the template (once) and return ``oracledb.connect`` arguments; no socket.

        Raises:
            ProviderError: ``CONNECTION_TEMPLATE_INVALID``, ``HOST_NOT_ALLOWED`` or
                ``SECRET_UNRESOLVED``.
        """
        return await self._engine.connection_kwargs()

    async def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._engine.close()


def bind_params(built: BuiltStatement, query: ValidatedQuery) -> dict[str, object]:
    """The execution's binds: DATE filter and record-predicate values as ``datetime.date``."""
    params = {name: bindable(value) for name, value in built.params.items()}
    for prefix, filters in (("f", query.filters), ("r", query.record_filters)):
        _dates(params, prefix, filters)
    if query.record_predicate is not None:
        for i, (field_type, value) in enumerate(predicate_values(query.record_predicate)):
            if field_type is FieldType.DATE and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    params[predicate_bind_name(i)] = date.fromisoformat(value)
    return params


def _dates(params: dict[str, object], prefix: str, filters: Sequence[ResolvedFilter]) -> None:
    for i, flt in enumerate(filters):
        if flt.type is not FieldType.DATE:
            continue
        for j, value in enumerate(flt.values):
            if isinstance(value, str):
                with contextlib.suppress(ValueError):
                    params[filter_bind_name(prefix, i, j)] = date.fromisoformat(value)


def _cancel(connection: oracledb.Connection) -> None:
    """Break the running call: ``Connection.cancel()`` is safe from another thread."""
    with contextlib.suppress(oracledb.Error):
        connection.cancel()
