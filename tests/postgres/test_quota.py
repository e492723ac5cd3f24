"""PostgresQuotaStore on a live server: one budget per caller and hour, however many instances."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import psycopg_pool
import pytest

from esra.core.exceptions import QuotaUnavailableError
from esra.core.testing import FakeClock
from esra.postgres import PostgresQuotaStore

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def pool(pg_dsn: str) -> AsyncIterator[psycopg_pool.AsyncConnectionPool[Any]]:
    opened: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=8, open=False
    )
    await opened.open(wait=True)
    yield opened
    await opened.close()


async def _store(pool: Any, schema: str, clock: FakeClock) -> PostgresQuotaStore:
    store = PostgresQuotaStore(pool, schema=schema, clock=clock)
    await store.create_table()
    await store.create_table()  # idempotent
    return store


async def test_concurrent_instances_never_exceed_the_budget(pool: Any, pg_schema: str) -> None:
    clock = FakeClock()
    # Three "instances" over one table, twenty concurrent 100-character pages.
    stores = [await _store(pool, pg_schema, clock) for _ in range(3)]
    granted = await asyncio.gather(
        *(stores[n % 3].consume("t-a", "alice", 100, 1_000) for n in range(20))
    )
    assert granted.count(True) == 10
    assert not await stores[0].consume("t-a", "alice", 1, 1_000)


async def test_budgets_are_per_tenant_and_caller_and_reset_each_hour(
    pool: Any, pg_schema: str
) -> None:
    clock = FakeClock()
    store = await _store(pool, pg_schema, clock)
    assert await store.consume("t-a", "alice", 900, 1_000)
    assert not await store.consume("t-a", "alice", 200, 1_000)
    assert await store.consume("t-a", "alice", 100, 1_000)
    assert await store.consume("t-b", "alice", 1_000, 1_000)
    assert await store.consume("t-a", "bob", 1_000, 1_000)
    assert not await store.consume("t-a", "carol", 1_001, 1_000)
    assert not await store.consume("t-a", "carol", -5, 1_000)

    async def hours_kept() -> object:
        async with pool.connection() as conn:
            cursor = await conn.execute(
                psycopg.sql.SQL("SELECT count(DISTINCT hour) FROM {}").format(
                    psycopg.sql.Identifier(pg_schema, "fetch_quota")
                )
            )
            return await cursor.fetchone()

    clock.advance(3600)
    assert await store.consume("t-a", "alice", 1_000, 1_000)
    # The new hour's first consumption swept the spent rows but the hour just ended's, which
    # an instance whose clock lags still counts into (test_quota_clock_skew.py).
    assert await hours_kept() == (2,)


def test_a_hostile_table_name_is_refused() -> None:
    with pytest.raises(ValueError, match="identifiers"):
        PostgresQuotaStore(None, table='quota"; DROP TABLE x; --')  # type: ignore[arg-type]


async def test_a_store_that_cannot_answer_refuses_rather_than_grants(
    pool: Any, pg_schema: str
) -> None:
    """Governance fails closed: a database error (here, no counter table) is the classified
    QuotaUnavailableError, never a grant and never an unclassified failure."""
    store = PostgresQuotaStore(pool, schema=pg_schema, clock=FakeClock())  # table not created
    with pytest.raises(QuotaUnavailableError):
        await store.consume("t-a", "alice", 10, 100)


async def test_the_hour_is_the_utc_hour_whatever_the_clocks_zone(pool: Any, pg_schema: str) -> None:
    """Two instances reading the same instant in different zones count into one hour: named
    by the local time, a clock at UTC+05:30 kept a budget of its own, ending at half past."""
    instant = datetime(2026, 3, 4, 12, 10, tzinfo=UTC)
    india = timezone(timedelta(hours=5, minutes=30))
    utc_host = await _store(pool, pg_schema, FakeClock(instant))
    india_host = await _store(pool, pg_schema, FakeClock(instant.astimezone(india)))
    assert await utc_host.consume("t-a", "alice", 600, 1_000)
    assert not await india_host.consume("t-a", "alice", 600, 1_000)
