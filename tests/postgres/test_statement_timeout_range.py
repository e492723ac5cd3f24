"""A configured timeout longer than PostgreSQL can state still bounds the statement.

``statement_timeout`` is an ``int`` of milliseconds: past 2,147,483,647 (about 24.8 days)
``set_config`` fails with 22023, which is ``SYNTAX_ERROR``. A capability's
``attempt_timeout_s`` has no upper bound, so one set that long (a tenant administrator's
"no limit") made every search of every PostgreSQL source fail. The limit is held at the
largest value the server takes; the caller's own timeout still ends the attempt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from esra.core.testing.contract import CONTRACT_MAPPING
from esra.postgres import PostgresProvider
from tests._injection import issue
from tests.postgres.conftest import make_provider, seed_contract

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def provider(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresProvider]:
    seed_contract(pg_dsn, pg_schema)
    provider = make_provider(pg_dsn, pg_schema, mappings=(CONTRACT_MAPPING,))
    yield provider
    await provider.close()


@pytest.mark.parametrize("timeout_s", [2_147_484.0, 1e12])
async def test_a_timeout_past_the_servers_range_still_searches(
    provider: PostgresProvider, timeout_s: float
) -> None:
    rows = await provider.execute(issue(optional_terms=("solar",)), timeout_s=timeout_s)
    assert {row.key for row in rows} == {"a07", "a03", "a01"}
