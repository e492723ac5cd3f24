"""One tenant's store ranking against another tenant's documents: a known cross-tenant channel.

The store keeps every tenant's segments in one view, and the PostgreSQL ranking counts each
term's ``df`` (and ``N``) over the whole relation. No other tenant's row is ever returned or
counted into a result, but the order of a tenant's own results moves with what other tenants
upload: a tenant who watches the order of two of its own documents for a pair of words can
tell when the words become common elsewhere in the store. The engines that keep their own
statistics (FTS5's ``bm25()``, InnoDB's relevance) behave alike over a shared table.

This test reproduces the channel and is expected to fail until the store keeps statistics
per tenant (docs/benchmarks.md, ``bench/docstore_search.py``, says why that is also what the
store's search time needs); ``strict`` makes it fail the suite once it is fixed, so the
marker cannot outlive the hole.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from esra.core._config.mapping import FieldType, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.postgres import PostgresProvider, apply_store_schema, store_mapping

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

ACME, GLOBEX, SCOPE = "acme", "globex", "s1"


@pytest.fixture
async def store_schema(pg_dsn: str) -> AsyncIterator[str]:
    """A freshly applied store schema, dropped afterwards."""
    schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    yield schema
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _index(dsn: str, schema: str, tenant: str, bodies: dict[str, str]) -> None:
    """Store each body as an indexed one-segment document of ``tenant`` under its key."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, body in bodies.items():
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (id, tenant_id, title, format, sha256, size, scope, state,"
                    " created_at, updated_at) VALUES (%s, %s, %s, 'txt', md5(%s), 1, %s,"
                    " 'indexed', now(), now())"
                ).format(sql.Identifier(schema, "documents")),
                (key, tenant, key, key, SCOPE),
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (document_id, tenant_id, ordinal, label, title, body,"
                    " indexed) VALUES (%s, %s, 0, 'part 0', %s, %s, %s)"
                ).format(sql.Identifier(schema, "segments")),
                (key, tenant, key, body, body),
            )


def _query(schema: str) -> ValidatedQuery:
    mapping = store_mapping(ACME, schema=schema)
    return _issue(
        query_id="document_store#1",
        source_id=mapping.source_id,
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=("alpha", "beta"),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(
            ResolvedFilter("tenant_id", FieldType.TEXT, Operator.EQ, (ACME,)),
            ResolvedFilter("scope", FieldType.TEXT, Operator.IN, (SCOPE,)),
        ),
        projection=(ProjectedField("title", "title"),),
        freshness=None,
        row_limit=10,
    )


async def _acme_ranking(dsn: str, schema: str) -> list[tuple[str, float]]:
    parts = urlsplit(dsn)
    provider = PostgresProvider(
        tenant_id=ACME,
        connection=dsn,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(ACME, parts.hostname or "", parts.port or 5432)]),
        mappings=(store_mapping(ACME, schema=schema),),
        text_search_config="simple",
        search_path=schema,
        pool_size=1,
    )
    try:
        rows = await provider.execute(_query(schema), timeout_s=10.0)
    finally:
        await provider.close()
    return [(row.key, row.score) for row in rows]


@pytest.mark.xfail(
    strict=True,
    reason="the store's df and N span every tenant: another tenant's uploads reorder this one's",
)
async def test_another_tenants_uploads_never_move_a_tenants_ranking(
    pg_dsn: str, store_schema: str
) -> None:
    """Acme's ``alpha`` is rarer than its ``beta``, so its alpha document ranks first. Globex
    then indexes thirty documents about alpha: nothing of Globex's may change Acme's order or
    scores."""
    filler = {f"acme-{n}": "gamma delta epsilon" for n in range(6)}
    _index(
        pg_dsn,
        store_schema,
        ACME,
        {"acme-alpha": "alpha gamma", "acme-beta-1": "beta gamma", "acme-beta-2": "beta delta"}
        | filler,
    )
    before = await _acme_ranking(pg_dsn, store_schema)
    assert [key for key, _ in before][:1] == ["acme-alpha"]
    _index(pg_dsn, store_schema, GLOBEX, {f"globex-{n}": "alpha zeta" for n in range(30)})
    after = await _acme_ranking(pg_dsn, store_schema)
    assert after == before
