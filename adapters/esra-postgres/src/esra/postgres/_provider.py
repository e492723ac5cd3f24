"""PostgresProvider: the ``SearchProvider`` over PostgreSQL ``tsvector`` full text, read-only.

Nothing connects at construction. On first use the connection template is resolved
(``HOST_NOT_ALLOWED`` / ``SECRET_UNRESOLVED`` / ``CONNECTION_TEMPLATE_INVALID`` before any
socket opens), one direct connection is attempted so a refused or unauthenticated connection
fails at once with its own code, and a ``psycopg_pool.AsyncConnectionPool`` is opened for the
provider (one pool per source).

Every execution, on a pooled autocommit connection, is one pipeline and one transaction::

    SELECT pg_catalog.set_config('transaction_read_only', 'on', true),  -- this transaction
           pg_catalog.set_config('statement_timeout', %(ms)s, true),    -- timeout_s left
           pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)
    <the StatementBuilder SELECT, every value bound, its relation schema-qualified>
    Sync                                                       -- commits; a failure rolls back

In PostgreSQL's extended query protocol the statements sent before a Sync share one
transaction, committed at the Sync (or rolled back if one failed, the rest then skipped):
the transaction is made read-only and given its limits by its first statement, and
``set_config(..., true)`` ends with it — what ``BEGIN READ ONLY`` … ``COMMIT`` did, in two
statements instead of four. Pooled connections are read-only by default as well.

The search path holds ``pg_catalog`` alone (CVE-2018-1058). PostgreSQL resolves a function
or an operator over every schema of the path, and a candidate of better-matching argument
types wins wherever it is: ``pg_catalog`` has no ``=(varchar, varchar)``, no
``>=(numeric, smallint)``, no ``=(oid, regclass)``, so one planted on those types in the
source's schema (or ``public``) by anyone who may CREATE there decided the statement's record
filters, filters and ranking, and ran as the reader on every search. With ``pg_catalog`` alone
on the path only the system's functions and operators can be chosen; the mapping's relation
is written with its schema (the mapping's, else the provider's ``search_path`` option), so
nothing the statement reads depends on the path. The settings statement itself runs under
the session's path, which a role or database setting may order as it likes: it names
``pg_catalog`` for its one function.

Cancelling the awaiting task cancels the statement on the server (psycopg does so while it
waits; ``cancel_safe()`` is called again if the connection is still busy), rolls back and
re-raises ``CancelledError``. Every failure leaves as ``ProviderError(code)``; driver text goes
to the ``esra.postgres`` log only.

The flow every SQL engine shares (refusal, build, row mapping, health verdict) is
``esra.sql.SqlSearchProvider``'s; what is PostgreSQL's own is the part below.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.pq import TransactionStatus
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from esra.core.codes import ProviderErrorCode
from esra.core.config import Mapping
from esra.core.exceptions import ProviderError
from esra.core.ports import HostAllowlist, SecretStore, TextIndexKind
from esra.core.providers import ValidatedQuery
from esra.postgres._bm25 import MAX_SCORED_TERMS
from esra.postgres._connection import PRIVATE_FILE_OPTIONS, SCHEMES, connect_kwargs, scrub
from esra.postgres._errors import classify
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG, TsvectorFullText
from esra.sql import (
    HEALTH_TIMEOUT_S,
    BuiltStatement,
    CompiledStatementCache,
    EngineTraits,
    ExecutionState,
    SourceConnection,
    SqlSearchProvider,
    StatementBuilder,
    TimeBudget,
)

__all__ = ["SEARCH_PATH", "PostgresProvider"]

_log = logging.getLogger("esra.postgres")

_BEGIN = b"BEGIN READ ONLY"
# The transaction's search path: the system schema alone, then the session's temporary
# schema last (so a temporary object never comes first); see the module's docstring.
SEARCH_PATH = "pg_catalog, pg_temp"
_SETTINGS = (
    "SELECT pg_catalog.set_config('statement_timeout', %(ms)s, true), "
    f"pg_catalog.set_config('search_path', '{SEARCH_PATH}', true)"
)
# The first statement of an execution's pipeline: its transaction read-only, its limits.
_READ_ONLY_LIMITS = (
    "SELECT pg_catalog.set_config('transaction_read_only', 'on', true), "
    "pg_catalog.set_config('statement_timeout', %(ms)s, true), "
    f"pg_catalog.set_config('search_path', '{SEARCH_PATH}', true)"
)
DEFAULT_HEALTH_TIMEOUT_S = HEALTH_TIMEOUT_S
# ``statement_timeout`` is an int of milliseconds (about 24.8 days): past it ``set_config``
# fails (22023), and a capability's timeout has no upper bound.
_MAX_STATEMENT_TIMEOUT_MS = 2**31 - 1
_CANCEL_TIMEOUT_S = 5.0
_MAPPING_READY = (
    "SELECT c.oid IS NOT NULL, "
    "coalesce((SELECT format_type(a.atttypid, a.atttypmod) = 'tsvector' FROM pg_attribute a "
    "WHERE a.attrelid = c.oid AND a.attname = %(index)s AND NOT a.attisdropped), false) "
    "FROM (SELECT to_regclass(%(relation)s) AS oid) AS c"
)


async def _configure(conn: psycopg.AsyncConnection[Any]) -> None:
    """Make every pooled connection read-only by default too (defence in depth).

    Each execution's transaction is made read-only by its first statement anyway; with this,
    even a statement sent outside one could not write.
    """
    await conn.execute(b"SET default_transaction_read_only = on")


class _PostgresEngine:
    """The PostgreSQL part of the provider: an asynchronous psycopg pool opened on first
    use, and the read-only transaction with server-side limits around every statement."""

    traits = EngineTraits(
        name="postgres", text_index=TextIndexKind.POSTGRES_TSVECTOR, terms_need_text_index=True
    )

    def __init__(
        self,
        connection: SourceConnection,
        *,
        tenant_id: str,
        pool_size: int,
        text_search_config: str,
        search_path: str,
        connect_timeout_s: float,
        health_timeout_s: float,
        cache: CompiledStatementCache | None,
    ) -> None:
        if pool_size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        if not health_timeout_s > 0:
            msg = "health_timeout_s must be positive"
            raise ValueError(msg)
        self._connection = connection
        self._tenant_id = tenant_id
        self._pool_size = pool_size
        self._search_path = search_path
        self._connect_timeout_s = connect_timeout_s
        self._health_timeout_s = health_timeout_s
        self.fulltext = TsvectorFullText(text_search_config)
        self._builder = StatementBuilder(
            psycopg_dialect.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
            self.fulltext,
            cache=cache,
            default_schema=search_path,
        )
        self._pool: psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._opening: asyncio.Lock | None = None
        self._closed = False

    @property
    def builder(self) -> StatementBuilder:
        return self._builder

    async def statement_builder(self) -> StatementBuilder:
        return self._builder

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> list[Any]:
        """Take a pooled connection within the budget and run the statement on it."""
        loop = asyncio.get_running_loop()
        # On the loop's clock, from now: the pool wait and the statement share it.
        deadline = loop.time() + budget.seconds
        pool = await self._ensure_pool(budget.seconds)
        state = ExecutionState()
        try:
            async with pool.connection(timeout=max(deadline - loop.time(), 0.001)) as conn:
                return await self._run(conn, built, query, state, deadline)
        except psycopg_pool.PoolTimeout as exc:
            raise await self._pool_failure(exc, query) from exc
        except psycopg_pool.PoolClosed as exc:
            raise ProviderError(ProviderErrorCode.CANCELLED) from exc

    async def _run(
        self,
        conn: psycopg.AsyncConnection[Any],
        built: BuiltStatement,
        query: ValidatedQuery,
        state: ExecutionState,
        deadline: float,
    ) -> list[Any]:
        """Run the statement in its own read-only transaction with the server-side limits."""
        loop = asyncio.get_running_loop()
        remaining_ms = int((deadline - loop.time()) * 1000)
        if remaining_ms < 1:
            # The pool wait used the whole budget: nothing was sent.
            raise ProviderError(ProviderErrorCode.TIMEOUT)
        params = {name: scrub(value) for name, value in built.params.items()}
        limit_ms = str(min(remaining_ms, _MAX_STATEMENT_TIMEOUT_MS))
        try:
            # One pipeline, one round trip, one transaction (see the module's docstring): the
            # limits and the statement are sent together and committed by the pipeline's Sync;
            # a failure of either aborts the rest and rolls the transaction back.
            async with conn.pipeline():
                await conn.execute(_READ_ONLY_LIMITS, {"ms": limit_ms})
                cursor = await conn.execute(built.sql, params)
            rows = await cursor.fetchall()
        except asyncio.CancelledError:
            state.cancelled = True
            await self._abandon(conn)
            raise
        except psycopg.Error as exc:
            state.timed_out = loop.time() >= deadline - 0.001
            await self._rollback(conn)
            raise self._failure(exc, query, built.sql, state) from exc
        return rows

    async def _abandon(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """After a task cancellation: make sure the server stops, then roll back."""
        try:
            if conn.info.transaction_status is TransactionStatus.ACTIVE:
                await conn.cancel_safe(timeout=_CANCEL_TIMEOUT_S)
        except (psycopg.Error, OSError) as exc:
            _log.warning("postgres cancel request failed: %s", exc)
        await self._rollback(conn)

    @staticmethod
    async def _rollback(conn: psycopg.AsyncConnection[Any]) -> None:
        if conn.closed or conn.info.transaction_status is TransactionStatus.IDLE:
            return
        try:
            await conn.execute(b"ROLLBACK")
        except psycopg.Error as exc:
            # A broken connection: the pool discards it when it comes back.
            _log.warning("postgres rollback failed: %s", exc)

    @staticmethod
    def _failure(
        exc: psycopg.Error, query: ValidatedQuery, statement: str, state: ExecutionState
    ) -> ProviderError:
        code = classify(exc, text_index=query.mapping.text_index, statement=statement, state=state)
        # Driver text may name tables or echo content: log only, never in the error.
        _log.warning(
            "postgres query %s failed as %s (SQLSTATE %s): %s",
            query.query_id,
            code.value,
            exc.sqlstate,
            exc,
        )
        return ProviderError(code)

    async def _pool_failure(
        self, exc: psycopg_pool.PoolTimeout, query: ValidatedQuery
    ) -> ProviderError:
        """No connection in time: every one busy (RESOURCE_EXHAUSTED), or none can be made."""
        pool = self._pool
        if pool is not None and pool.get_stats().get("pool_size", 0) == 0:
            # The pool holds no connection at all: the server is what failed. Ask it directly
            # so the caller gets CONNECTION_REFUSED or AUTH_FAILED rather than a busy pool.
            try:
                await self._probe(await self._connect_kwargs(self._connect_timeout_s))
            except ProviderError as error:
                return error
        _log.warning("postgres pool exhausted for query %s: %s", query.query_id, exc)
        return ProviderError(ProviderErrorCode.RESOURCE_EXHAUSTED)

    async def _ensure_pool(
        self, timeout_s: float
    ) -> psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        """Resolve the template and open the pool on first use (once, under a lock)."""
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise ProviderError(ProviderErrorCode.CANCELLED)
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            opened = self._existing_pool()  # another task may have opened it meanwhile
            if opened is not None:
                return opened
            kwargs = await self._connect_kwargs(min(self._connect_timeout_s, max(timeout_s, 1.0)))
            await self._probe(kwargs)
            pool: psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]]
            pool = psycopg_pool.AsyncConnectionPool(
                # Resolved anew for every connection the pool opens (see ``_connect_kwargs``).
                kwargs=partial(self._connect_kwargs, self._connect_timeout_s),
                min_size=1,
                max_size=self._pool_size,
                open=False,
                name=f"esra-{self._tenant_id}",
                configure=_configure,
                timeout=self._connect_timeout_s,
            )
            await pool.open()
            self._pool = pool
            return pool

    async def _connect_kwargs(self, connect_timeout_s: float) -> dict[str, Any]:
        """The template resolved now: secrets substituted, the host checked against the
        allowlist.

        Called for the first connection and again for every connection the pool opens
        later, so a secret rotated since (a stored secret written again, a secret file
        replaced) is what the next connection logs in with, and a host taken off the
        allowlist gets no new connection — without reopening the provider.

        Raises:
            ProviderError: the template does not resolve (the pool logs it and retries).
        """
        target = await self._connection.resolve()
        return connect_kwargs(target, connect_timeout_s=connect_timeout_s)

    def _existing_pool(
        self,
    ) -> psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None:
        return self._pool

    @staticmethod
    async def _probe(kwargs: dict[str, Any]) -> None:
        """Connect once directly, so a connection failure is classified by its own cause."""
        try:
            probe = await psycopg.AsyncConnection.connect(**kwargs)
        except psycopg.Error as exc:
            code = classify(exc)
            _log.warning("postgres connection failed as %s: %s", code.value, exc)
            raise ProviderError(code) from exc
        await probe.close()

    async def readiness(self, mappings: Sequence[Mapping]) -> list[bool]:
        """Check every mapping's relation and tsvector column on a pooled connection.

        The whole check, connecting and login included, must finish within
        ``health_timeout_s``: a server that accepts the connection and then never answers
        (a login outage) must not hold the caller for as long as the driver's own timeouts
        would.

        Raises:
            ProviderError: ``TIMEOUT`` past ``health_timeout_s``, or the connection's code.
            psycopg.Error: a failure of the check's own statements.
            psycopg_pool.PoolTimeout: no connection came free in time.
        """
        timeout_s = self._health_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                pool = await self._ensure_pool(timeout_s)
                async with pool.connection(timeout=timeout_s) as conn:
                    return await self._check(conn, mappings)
        except TimeoutError as exc:
            _log.warning("postgres health check did not finish within %s s", timeout_s)
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc

    async def _check(
        self, conn: psycopg.AsyncConnection[Any], mappings: Sequence[Mapping]
    ) -> list[bool]:
        ready: list[bool] = []
        try:
            await conn.execute(_BEGIN)
            await conn.execute(_SETTINGS, {"ms": str(int(self._health_timeout_s * 1000))})
            await conn.execute(b"SELECT 1")
            for mapping in mappings:
                schema = mapping.schema or self._search_path
                relation = sql.Identifier(schema, mapping.relation).as_string(conn)
                cursor = await conn.execute(
                    _MAPPING_READY, {"relation": relation, "index": mapping.text_index or ""}
                )
                row = await cursor.fetchone()
                exists, vector = (bool(row[0]), bool(row[1])) if row else (False, False)
                ready.append(exists and (vector or mapping.text_index is None))
            await conn.execute(b"COMMIT")
        except BaseException:
            await self._rollback(conn)
            raise
        return ready

    async def close(self) -> None:
        """Close the pool (waiting for connections in use to come back)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


class PostgresProvider(SqlSearchProvider[_PostgresEngine]):
    """Searches one PostgreSQL database through tsvector columns, read-only and pooled.

    Args:
        tenant_id: the source's tenant; secrets and the allowlist are consulted with it.
        connection: the source's connection template (``connection_ref``), e.g.
            ``postgresql://esra_reader:${secret:pg-password}@db.internal:5432/sales``.
        secrets: resolves ``${secret:NAME}`` references for the tenant.
        allowlist: must allow the template's host and port for the tenant.
        mappings: the source's mappings, checked by ``health()``; executions use the mapping
            carried by each query.
        pool_size: the most connections the provider's pool holds (at least one is kept).
        max_rows: the largest row cap this provider accepts (stated in ``capabilities``).
        text_search_config: the ``regconfig`` terms are tokenized with (bound, never text);
            it must match the one the text-index columns were generated with.
        search_path: the schema a mapping's relation is read from when the mapping names
            none (written into the statement: the transaction's own search path is
            ``pg_catalog`` alone, so planted functions and operators are never chosen).
        connect_timeout_s: the longest a new connection may take.
        health_timeout_s: the longest one ``health()`` call may take, connecting included;
            past it the source is ``UNAVAILABLE``.
        cache: compiled-statement cache; a fresh 256-entry LRU by default.

    Call ``await close()`` when done.
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
        text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG,
        search_path: str = "public",
        connect_timeout_s: float = 10.0,
        health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S,
        cache: CompiledStatementCache | None = None,
    ) -> None:
        source = SourceConnection(
            connection,
            tenant_id=tenant_id,
            secrets=secrets,
            allowlist=allowlist,
            schemes=SCHEMES,
            private_file_options=PRIVATE_FILE_OPTIONS,
        )
        engine = _PostgresEngine(
            source,
            tenant_id=tenant_id,
            pool_size=pool_size,
            text_search_config=text_search_config,
            search_path=search_path,
            connect_timeout_s=connect_timeout_s,
            health_timeout_s=health_timeout_s,
            cache=cache,
        )
        super().__init__(
            engine, mappings=mappings, max_rows=max_rows, max_scored_terms=MAX_SCORED_TERMS
        )

    @property
    def text_search_config(self) -> str:
        """The text search configuration bound into every query."""
        return self._engine.fulltext.config

    async def close(self) -> None:
        """Close the pool (waiting for connections in use to come back)."""
        await self._engine.close()
