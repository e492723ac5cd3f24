"""PostgresQuotaStore across instances whose clocks differ by a little at an hour's turn.

An instance whose clock runs ahead enters the new hour first and sweeps spent rows; an
instance a second behind still counts into the hour just ended. Its caller must still find
that hour's spending, or the sweep hands out a second whole budget for the same hour.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg_pool
import pytest

from esra.core.testing import FakeClock
from esra.postgres import PostgresQuotaStore

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def pool(pg_dsn: str) -> AsyncIterator[psycopg_pool.AsyncConnectionPool[Any]]:
    opened: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=4, open=False
    )
    await opened.open(wait=True)
    yield opened
    await opened.close()


async def test_a_host_ahead_does_not_sweep_the_hour_a_lagging_host_still_counts(
    pool: Any, pg_schema: str
) -> None:
    behind = FakeClock(datetime(2026, 1, 1, 9, 59, 58, tzinfo=UTC))
    ahead = FakeClock(datetime(2026, 1, 1, 10, 0, 1, tzinfo=UTC))
    lagging = PostgresQuotaStore(pool, schema=pg_schema, clock=behind)
    leading = PostgresQuotaStore(pool, schema=pg_schema, clock=ahead)
    await lagging.create_table()

    assert await lagging.consume("t-a", "alice", 1_000, 1_000)
    # The instance ahead sees 10:00 first (any caller's fetch) and sweeps.
    assert await leading.consume("t-a", "bob", 10, 1_000)
    # Still 09:59 on the lagging instance: alice spent this hour's budget already.
    assert not await lagging.consume("t-a", "alice", 1_000, 1_000)


async def test_rows_older_than_the_hour_just_ended_are_still_swept(
    pool: Any, pg_schema: str
) -> None:
    clock = FakeClock(datetime(2026, 1, 1, 8, 30, tzinfo=UTC))
    store = PostgresQuotaStore(pool, schema=pg_schema, clock=clock)
    await store.create_table()
    assert await store.consume("t-a", "alice", 1, 1_000)
    clock.advance(3600)
    assert await store.consume("t-a", "alice", 1, 1_000)
    clock.advance(3600)
    assert await store.consume("t-a", "alice", 1, 1_000)
    async with pool.connection() as conn:
        cursor = await conn.execute(f'SELECT hour FROM "{pg_schema}".fetch_quota ORDER BY hour')
        assert [row[0] for row in await cursor.fetchall()] == ["2026010109", "2026010110"]
