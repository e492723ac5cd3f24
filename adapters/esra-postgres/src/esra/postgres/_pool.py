"""``open_pool``: the connection pool ESRA's own PostgreSQL stores open for themselves.

The document store, the configuration store, the audit log and the secret table each take an
open pool (the host may share one) or, through their ``open(...)`` class method, open their
own. Those pools are all alike, so they are opened here: autocommit connections, because
every method opens its own transaction and none may be left open implicitly; no prepared
statements; the session in UTC where a store reads timestamps back, so they never depend on
the server's ``TimeZone`` (a parameter PgBouncer tracks per client, so transaction pooling
keeps it);
and opened before it is returned (``wait=True``), so a wrong address or credential fails the
caller's ``open`` instead of the first statement.

This is not the provider's pool (``esra.postgres._provider``): that one reads customer
databases through connections set up read-only, from an allow-listed connection template.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import psycopg
import psycopg_pool

__all__ = ["Pool", "open_pool", "ping_pool"]

Pool = psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]]


async def _utc_session(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute("SET TIME ZONE 'UTC'")


async def open_pool(
    conninfo: str = "",
    *,
    kwargs: Mapping[str, Any] | None,
    name: str,
    min_size: int,
    max_size: int,
    utc: bool = True,
    prepare: Callable[[psycopg.AsyncConnection[Any]], Awaitable[object]] | None = None,
) -> Pool:
    """Open a pool of autocommit connections (``conninfo`` and/or ``kwargs``) and wait for it.

    Args:
        conninfo: a libpq connection string (may be empty when ``kwargs`` say it all).
        kwargs: psycopg connect arguments (``esra.postgres.connect_kwargs``' output).
        name: the pool's name (``esra-audit``, ...), as psycopg logs it.
        min_size: connections kept open.
        max_size: connections at the most.
        utc: set each session's time zone to UTC.
        prepare: run once on one of the pool's connections before it is returned (a store
            that applies its schema when opened); if it raises, the pool is closed.

    Raises:
        psycopg_pool.PoolTimeout: if no connection could be opened.
        Exception: whatever ``prepare`` raises.
    """
    options = dict(kwargs or {})
    options["autocommit"] = True
    # No server-side prepared statements: session state a transaction-mode PgBouncer cannot
    # keep between transactions, and generic plans for the store's full-text statements.
    options["prepare_threshold"] = None
    pool: Pool = psycopg_pool.AsyncConnectionPool(
        conninfo,
        kwargs=options,
        min_size=min_size,
        max_size=max_size,
        open=False,
        name=name,
        configure=_utc_session if utc else None,
    )
    try:
        await pool.open(wait=True)
        if prepare is not None:
            async with pool.connection() as conn:
                await prepare(conn)
    except BaseException:
        # Failed, or cancelled (a Ctrl-C while the process starts): stop the pool's workers
        # here. Left running, asyncio.run's shutdown cancels them in the middle of a connect,
        # the pool takes that for a failed attempt and waits for the next one, and the
        # process never exits.
        await pool.close()
        raise
    return pool


async def ping_pool(pool: Pool) -> None:
    """``SELECT 1`` on one of ``pool``'s connections: the server is reachable and answers.

    Waits for a free connection as any statement would (the caller bounds the wait).

    Raises:
        psycopg.Error, psycopg_pool.PoolTimeout: no connection, or the statement failed.
    """
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")
