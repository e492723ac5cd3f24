"""A record-filter template applied by the real PostgreSQL provider, in the executed query."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from esra.postgres import PostgresProvider
from tests._external import load_sqli_payloads
from tests._record_templates import (
    CALLERS,
    CLASSIC_PAYLOADS,
    COLUMNS,
    DROPPED_PAYLOADS,
    MAPPING,
    ROWS,
    Caller,
    assert_payloads_see_nothing,
    query_for,
    visible_keys,
)
from tests.postgres.conftest import make_provider, seed_table, table_counts

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def provider(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresProvider]:
    """A provider over the template dataset (a real table with a tsvector index)."""
    seed_table(pg_dsn, pg_schema, MAPPING, COLUMNS, ROWS)
    provider = make_provider(pg_dsn, pg_schema, mappings=(MAPPING,))
    yield provider
    await provider.close()


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: c.name)
async def test_each_caller_sees_exactly_the_rows_the_template_admits(
    provider: PostgresProvider, caller: Caller
) -> None:
    """Different claims, different rows — decided by PostgreSQL, NULLs included."""
    assert await visible_keys(provider, caller.claims) == caller.expected


def test_the_executed_statement_binds_every_claim(provider: PostgresProvider) -> None:
    """The text carries the predicate's structure; claim values are parameters only."""
    query = query_for(provider, CALLERS[0].claims)
    assert query is not None
    built = provider.builder.build(query)
    predicate = '(b.doc_region = %(p0)s OR b."Doc Owner" = %(p1)s AND b.doc_archived != %(p2)s)'
    assert predicate in built.sql
    assert (built.params["p0"], built.params["p1"], built.params["p2"]) == ("emea", "alice", True)
    assert "alice" not in built.sql


async def test_injection_payloads_as_claims_see_nothing_and_break_nothing(
    provider: PostgresProvider, pg_dsn: str, pg_schema: str
) -> None:
    """A payload in every claim matches no row, raises nothing, and changes no table."""
    before = table_counts(pg_dsn, pg_schema)
    ran = await assert_payloads_see_nothing(provider, CLASSIC_PAYLOADS + DROPPED_PAYLOADS)
    assert ran == len(CLASSIC_PAYLOADS)
    assert table_counts(pg_dsn, pg_schema) == before
    alice = CALLERS[0]
    assert await visible_keys(provider, alice.claims) == alice.expected


@pytest.mark.external_data
async def test_the_sqli_corpus_as_claims_sees_nothing(
    provider: PostgresProvider, pg_dsn: str, pg_schema: str
) -> None:
    """A spread of the public corpus, as both claims, returns no row and alters nothing."""
    before = table_counts(pg_dsn, pg_schema)
    assert await assert_payloads_see_nothing(provider, load_sqli_payloads()[::20]) > 0
    assert table_counts(pg_dsn, pg_schema) == before
