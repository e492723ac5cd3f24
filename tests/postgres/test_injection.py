"""The injection property for PostgreSQL, proved with ~19,000 real SQL-injection payloads.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the point is that the builder and the provider are
safe even for a future code path that forgets the validator.
"""

from __future__ import annotations

import pytest
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from esra.core._pipeline.values import ValidatedQuery
from esra.postgres import TsvectorFullText
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._external import load_sqli_payloads
from tests._injection import (
    assert_every_slot_compiles_to_the_benign_text,
    execute_payloads,
    payload_query,
)
from tests.postgres.conftest import make_provider, seed_contract, table_counts

pytestmark = pytest.mark.external_data


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def _query(*, required: str = "solar", **slots: str) -> ValidatedQuery:
    """Every slot filled; the required term is also excluded, so ``!!`` sees it too."""
    return payload_query(required=required, excluded=(required,), **slots)


def _uncached_builder() -> StatementBuilder:
    return StatementBuilder(
        psycopg_dialect.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
        TsvectorFullText(),
        cache=CompiledStatementCache(0),
    )


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """Each payload in the required, optional, phrase, filter and claim slots leaves the
    uncached PostgreSQL command text byte-identical to the benign query's."""
    benign = assert_every_slot_compiles_to_the_benign_text(_uncached_builder, _query, payloads)
    assert "phraseto_tsquery(CAST(%(qcfg)s AS REGCONFIG)" in benign


@pytest.mark.postgres
@pytest.mark.integration
async def test_executing_every_payload_is_inert(
    pg_dsn: str, pg_schema: str, payloads: list[str]
) -> None:
    """As a term and as filter/claim values, no payload fails, widens the result, or writes.

    Term payloads run with benign filters (category energy, org acme): every row returned
    must satisfy them. Value payloads run as the category filter and the org claim: a row
    may come back only if its stored values equal the payload exactly. Every term payload
    is also an excluded term, so ``!!`` sees every payload too.
    """
    seed_contract(pg_dsn, pg_schema)
    before = table_counts(pg_dsn, pg_schema)
    provider = make_provider(pg_dsn, pg_schema, pool_size=4)
    try:
        failures = await execute_payloads(provider, payloads, exclude_optional=True, concurrency=4)
    finally:
        await provider.close()
    assert failures == []
    assert table_counts(pg_dsn, pg_schema) == before
