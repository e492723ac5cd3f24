"""PostgresQuotaStore given a caller that PostgreSQL text cannot hold.

A token's subject is any JSON string its issuer signed, lone surrogates (``"\\ud800"``)
included, and the caller key carries it as is. Such a key cannot be sent as UTF-8: the
consumption must still end in the store's classified, fail-closed refusal rather than an
unclassified encoding error (an ``ESRA_INTERNAL`` for the fetch).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import psycopg_pool
import pytest

from esra.core.exceptions import QuotaUnavailableError
from esra.core.testing import FakeClock
from esra.postgres import PostgresQuotaStore

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def pool(pg_dsn: str) -> AsyncIterator[psycopg_pool.AsyncConnectionPool[Any]]:
    opened: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    )
    await opened.open(wait=True)
    yield opened
    await opened.close()


async def test_a_caller_with_a_lone_surrogate_is_refused_classified(
    pool: Any, pg_schema: str
) -> None:
    store = PostgresQuotaStore(pool, schema=pg_schema, clock=FakeClock())
    await store.create_table()
    with pytest.raises(QuotaUnavailableError):
        await store.consume("t-a", '["https://idp","a\ud800"]', 10, 1_000)
    # The pool is unharmed: the next caller is metered as usual.
    assert await store.consume("t-a", '["https://idp","alice"]', 10, 1_000)
