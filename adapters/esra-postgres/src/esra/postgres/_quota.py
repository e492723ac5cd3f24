"""PostgresQuotaStore: the ``QuotaStore`` port shared by every runtime instance, on PostgreSQL.

One row per (tenant, caller, hour). Consumption is a single statement, so concurrent fetches
on any number of instances can never together exceed a caller's budget::

    INSERT INTO quota AS q (tenant_id, caller, hour, used) VALUES (:t, :c, :h, :amount)
    ON CONFLICT (tenant_id, caller, hour)
    DO UPDATE SET used = q.used + EXCLUDED.used WHERE q.used + EXCLUDED.used <= :limit
    RETURNING used

A row comes back exactly when the amount fitted; the conflict branch's ``WHERE`` leaves the
row untouched otherwise. The hour is the caller's clock (the ``Clock`` port), not the
server's ``now()``, so a fake clock moves it in tests. As each instance sees a new hour begin
it deletes the rows of hours before the one just ended: an instance whose clock lags still
counts into that hour, and deleting its rows would grant its callers the hour's budget again.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, timedelta
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql

from esra.core import SystemClock
from esra.core.exceptions import QuotaUnavailableError
from esra.core.ports import Clock

__all__ = ["DEFAULT_QUOTA_TABLE", "DEFAULT_QUOTA_TIMEOUT_S", "PostgresQuotaStore"]

DEFAULT_QUOTA_TABLE = "fetch_quota"
# How long one consumption may take, waiting for a pooled connection included.
DEFAULT_QUOTA_TIMEOUT_S = 2.0
_log = logging.getLogger(__name__)
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

Pool = psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]]


class PostgresQuotaStore:
    """Hourly per-caller character budgets in ``<schema>.<table>``.

    Args:
        pool: an open pool of autocommit connections (each statement is its own transaction).
        schema / table: where the counters live; ``create_table()`` makes them.
        clock: time source for the current hour (the system clock by default).
        timeout_s: the longest one consumption may take; past it, or on any database
            error, the store fails closed with ``QuotaUnavailableError``.

    Raises:
        ValueError: if ``schema`` or ``table`` is not a plain lowercase identifier.
    """

    def __init__(
        self,
        pool: Pool,
        *,
        schema: str = "esra",
        table: str = DEFAULT_QUOTA_TABLE,
        clock: Clock | None = None,
        timeout_s: float = DEFAULT_QUOTA_TIMEOUT_S,
    ) -> None:
        if not timeout_s > 0:
            msg = "timeout_s must be positive"
            raise ValueError(msg)
        self._timeout_s = timeout_s
        for name in (schema, table):
            if not _NAME.fullmatch(name):
                msg = "schema and table names must be plain lowercase identifiers"
                raise ValueError(msg)
        self._pool = pool
        self._schema = sql.Identifier(schema)
        self._table = sql.Identifier(schema, table)
        self._clock = clock or SystemClock()
        self._swept_hour = ""

    async def create_table(self) -> None:
        """Create the schema and counter table if they do not exist (idempotent)."""
        async with self._pool.connection() as conn:
            await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self._schema))
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {t} ("
                    " tenant_id text NOT NULL,"
                    " caller text NOT NULL,"
                    " hour text NOT NULL,"
                    " used bigint NOT NULL CHECK (used >= 0),"
                    " PRIMARY KEY (tenant_id, caller, hour))"
                ).format(t=self._table)
            )

    async def consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        """Consume ``amount`` if it fits within ``limit`` this hour; return whether it did.

        Raises:
            QuotaUnavailableError: the database did not answer within ``timeout_s`` or
                failed: governance fails closed, the fetch is refused, never unmetered.
        """
        if amount < 0 or amount > limit:
            return False
        try:
            async with asyncio.timeout(self._timeout_s):
                return await self._consume(tenant_id, caller, amount, limit)
        except (
            psycopg.Error,
            psycopg_pool.PoolTimeout,
            TimeoutError,
            OSError,
            # A tenant or caller PostgreSQL text cannot hold (a token subject's lone
            # surrogate): no counter can be kept for it, so it is refused, never unmetered.
            UnicodeEncodeError,
        ) as exc:
            # The type only: a driver's message can name the host or the role.
            _log.warning("fetch quota store unavailable: %s", type(exc).__name__)
            raise QuotaUnavailableError from None

    async def _consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        # The UTC hour whatever zone the clock reads in, as every instance must name it.
        now = self._clock.now().astimezone(UTC)
        hour = now.strftime("%Y%m%d%H")
        async with self._pool.connection() as conn:
            if hour != self._swept_hour:
                # Hours sort as text. The hour just ended is kept: an instance whose clock
                # lags this one's still counts into it, and must find what was spent there.
                ended = (now - timedelta(hours=1)).strftime("%Y%m%d%H")
                await conn.execute(
                    sql.SQL("DELETE FROM {t} WHERE hour < %(ended)s").format(t=self._table),
                    {"ended": ended},
                )
                self._swept_hour = hour
            cursor = await conn.execute(
                sql.SQL(
                    "INSERT INTO {t} AS q (tenant_id, caller, hour, used)"
                    " VALUES (%(tenant)s, %(caller)s, %(hour)s, %(amount)s)"
                    " ON CONFLICT (tenant_id, caller, hour)"
                    " DO UPDATE SET used = q.used + EXCLUDED.used"
                    " WHERE q.used + EXCLUDED.used <= %(limit)s"
                    " RETURNING used"
                ).format(t=self._table),
                {
                    "tenant": tenant_id,
                    "caller": caller,
                    "hour": hour,
                    "amount": amount,
                    "limit": limit,
                },
            )
            return await cursor.fetchone() is not None
