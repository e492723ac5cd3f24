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
from datetime import date, datetime
from typing import Any

import attrs
import oracledb
import sqlalchemy as sa
from sqlalchemy.dialects import oracle

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
from esra.core.query import ResolvedFilter, ResultRow, Strategy
from esra.core.record_predicate import predicate_values
from esra.core.validation import ValidatedQuery, ensure_validated
from esra.oracle.errors import classify
from esra.oracle.fulltext import OracleTextFullText
from esra.sql import (
    BuiltStatement,
    CompiledStatementCache,
    ConnectionTarget,
    PinnedRunner,
    SlotPool,
    StatementBuilder,
    filter_bind_name,
    predicate_bind_name,
    resolve_connection,
)

__all__ = [
    "HEALTH_PROBE_SQL",
    "READ_ONLY_SQL",
    "SCHEMES",
    "TEXT_INDEX_HEALTH_SQL",
    "OracleTextProvider",
    "current_schema_sql",
    "oracle_dialect",
]

_log = logging.getLogger("esra.oracle")

SCHEMES = {"oracle": 1521}
READ_ONLY_SQL = "SET TRANSACTION READ ONLY"
_OPTIONS = frozenset({"protocol"})
_HEALTH_TIMEOUT_S = 5.0
HEALTH_PROBE_SQL = "SELECT 1 FROM DUAL"
# Whether a mapping's CONTEXT index exists and is usable (names bound, never spliced).
TEXT_INDEX_HEALTH_SQL = (
    "SELECT COUNT(*) FROM ALL_INDEXES WHERE INDEX_NAME = :idx"
    " AND OWNER = COALESCE(:owner, SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA'))"
    " AND ITYP_NAME = 'CONTEXT' AND DOMIDX_STATUS = 'VALID'"
    " AND DOMIDX_OPSTATUS = 'VALID'"
)


def oracle_dialect() -> sa.engine.Dialect:
    """The ``oracle`` dialect with ``named`` binds (python-oracledb's ``:name`` style)."""
    dialect: Any = oracle.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
    return dialect  # type: ignore[no-any-return]


def current_schema_sql(schema: str) -> str:
    """Return ``ALTER SESSION SET CURRENT_SCHEMA = "<SCHEMA>"`` for a configured schema.

    The name follows SQLAlchemy's Oracle convention (an all-lowercase name means the
    case-insensitive, i.e. upper-case, identifier) and is always double-quoted.

    Raises:
        ValueError: for a name Oracle cannot have (empty, over 128 bytes, ``"`` or NUL).
    """
    if not schema or '"' in schema or "\x00" in schema or len(schema.encode()) > 128:
        msg = "invalid schema name"
        raise ValueError(msg)
    dialect: Any = oracle_dialect()
    name = dialect.denormalize_name(schema)
    quoted = dialect.identifier_preparer.quote_identifier(name)
    return f"ALTER SESSION SET CURRENT_SCHEMA = {quoted}"


def bindable(value: object) -> object:
    """Lone surrogates (undecodable input) become U+FFFD so the value binds as a literal."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return value


def _lobs_as_text(cursor: Any, metadata: Any) -> Any:
    """Fetch CLOB/NCLOB columns as ``str`` rather than LOB locators."""
    if metadata.type_code is oracledb.DB_TYPE_CLOB:
        return cursor.var(oracledb.DB_TYPE_LONG, arraysize=cursor.arraysize)
    if metadata.type_code is oracledb.DB_TYPE_NCLOB:
        return cursor.var(oracledb.DB_TYPE_LONG_NVARCHAR, arraysize=cursor.arraysize)
    return None


class OracleTextProvider:
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
        self._tenant_id = tenant_id
        self._template = connection
        self._secrets = secrets
        self._allowlist = allowlist
        self._mappings = tuple(mappings)
        self._schema_sql = current_schema_sql(current_schema) if current_schema else None
        self._connect_timeout_s = connect_timeout_s
        self._target: ConnectionTarget | None = None
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
        self._capabilities = ProviderCapabilities(
            strategies=frozenset(Strategy),
            operators=frozenset(Operator),
            text_index=TextIndexKind.ORACLE_TEXT,
            max_rows=max_rows,
        )

    @property
    def capabilities(self) -> ProviderCapabilities:
        """All six strategies, every operator, ``TextIndexKind.ORACLE_TEXT``."""
        return self._capabilities

    @property
    def builder(self) -> StatementBuilder:
        """The statement builder (exposed for inspection and cache statistics)."""
        return self._builder

    def render_statement(self, query: ValidatedQuery) -> RenderedStatement:
        """The statement ``execute`` sends for ``query``, without its values (for explain)."""
        return self.builder.render(query)

    async def connection_kwargs(self) -> dict[str, Any]:
        """Resolve the template (once) and return ``oracledb.connect`` arguments; no socket.

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
        """Open one connection and set its current schema (on a slot's thread; the template
        was resolved by ``connection_kwargs`` first)."""
        if self._target is None:  # pragma: no cover - every caller resolves the template first
            raise ProviderError(ProviderErrorCode.UNKNOWN)
        connection = oracledb.connect(**self._connect_kwargs(self._target))
        connection.outputtypehandler = _lobs_as_text
        if self._schema_sql is not None:
            connection.cursor().execute(self._schema_sql)
        return connection

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        """Run ``query`` within ``timeout_s`` seconds and return its rows, best first.

        Raises:
            UnvalidatedQueryError: if the validator did not issue ``query``.
            ProviderError: for every failure, with its classified code.
            asyncio.CancelledError: if the awaiting task is cancelled (the statement is
                broken off server-side first).
        """
        query = ensure_validated(query)
        try:
            built = self._builder.build(query)
        except Exception as exc:
            _log.warning("oracle statement could not be built for %s", query.query_id)
            raise ProviderError(ProviderErrorCode.UNKNOWN) from exc
        params = bind_params(built, query)
        await self.connection_kwargs()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s

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

        raw = await self._runner.run(work, timeout_s, query.query_id)
        return [_typed_row(built, row, query.mapping) for row in raw]

    async def health(self) -> SourceHealth:
        """``HEALTHY`` if the database answers and every mapping's CONTEXT index is valid;
        ``DEGRADED`` when only some are; ``UNAVAILABLE`` otherwise. Never raises."""
        dialect: Any = oracle_dialect()
        checks = [
            (
                dialect.denormalize_name(m.text_index or ""),
                dialect.denormalize_name(m.schema) if m.schema else None,
            )
            for m in self._mappings
        ]

        def work(connection: oracledb.Connection) -> list[Any]:
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

        try:
            await self.connection_kwargs()
            ready = await self._runner.run(work, _HEALTH_TIMEOUT_S, "health")
        except ProviderError as exc:
            _log.warning("oracle health check failed as %s", exc.code.value)
            return SourceHealth.UNAVAILABLE
        except Exception:
            _log.exception("oracle health check failed unexpectedly")
            return SourceHealth.UNAVAILABLE
        if all(ready):
            return SourceHealth.HEALTHY
        return SourceHealth.DEGRADED if any(ready) else SourceHealth.UNAVAILABLE

    async def close(self) -> None:
        """Close pooled connections (busy ones close when their statement ends)."""
        self._pool.close()


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


def _typed_row(built: BuiltStatement, raw: Sequence[Any], mapping: Mapping) -> ResultRow:
    """Map a driver row; Oracle DATE values of DATE fields come back as dates."""
    row = built.to_row(raw)
    dates = {f.name for f in mapping.fields if f.type is FieldType.DATE} & set(row.values)
    if not dates:
        return row
    values = dict(row.values)
    for name in dates:
        value = values[name]
        if isinstance(value, datetime):
            values[name] = value.date()
    return attrs.evolve(row, values=values)
