"""The injection property for PostgreSQL, proved with ~19,000 real SQL-injection payloads.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the point is that the builder and the provider are
safe even for a future code path that forgets the validator.
"""

from __future__ import annotations

import pytest
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from esra.core.config.mapping import FieldType, Operator
from esra.core.exceptions import ProviderError
from esra.core.query import ProjectedField, ResolvedFilter, Strategy
from esra.core.testing.contract import CONTRACT_MAPPING, CONTRACT_ROWS
from esra.core.validation import ValidatedQuery, _issue
from esra.postgres import TsvectorFullText
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._external import load_sqli_payloads
from tests.postgres.conftest import make_provider, seed_contract, table_counts

pytestmark = pytest.mark.external_data


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def _query(
    *,
    required: str = "solar",
    optional: str = "inverter",
    phrase: str = "solar panel",
    value: str = "energy",
    claim: str = "acme",
) -> ValidatedQuery:
    return _issue(
        query_id="src-contract#1",
        source_id=CONTRACT_MAPPING.source_id,
        mapping=CONTRACT_MAPPING,
        strategy=Strategy.KEYWORD,
        required_terms=(required,),
        optional_terms=(optional,),
        excluded_terms=(required,),
        phrases=(phrase,),
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (value,)),),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (claim,)),),
        projection=(ProjectedField("title", "art_title"), ProjectedField("body", "Art Body")),
        freshness=ProjectedField("published", "art_published"),
        row_limit=50,
    )


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """Each payload in the required, optional, phrase, filter and claim slots leaves the
    uncached PostgreSQL command text byte-identical to the benign query's."""
    builder = StatementBuilder(
        psycopg_dialect.dialect(paramstyle="pyformat"),  # type: ignore[no-untyped-call]
        TsvectorFullText(),
        cache=CompiledStatementCache(0),
    )
    benign = builder.compile(_query()).sql.encode()
    assert b"phraseto_tsquery(CAST(%(qcfg)s AS REGCONFIG)" in benign
    slots = ("required", "optional", "phrase", "value", "claim")
    for payload in payloads:
        together = builder.compile(_query(**dict.fromkeys(slots, payload)))
        assert together.sql.encode() == benign, payload
    for payload in payloads[::100]:
        for slot in slots:
            alone = builder.compile(_query(**{slot: payload}))
            assert alone.sql.encode() == benign, (slot, payload)


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
    in_scope = {
        str(r["art_key"])
        for r in CONTRACT_ROWS
        if r["art_category"] == "energy" and r["art_org"] == "acme"
    }
    by_key = {str(r["art_key"]): r for r in CONTRACT_ROWS}
    provider = make_provider(pg_dsn, pg_schema, pool_size=2)
    failures: list[tuple[str, str]] = []
    try:
        for payload in payloads:
            try:
                term_rows = await provider.execute(_variant(optional=payload), timeout_s=10.0)
                value_rows = await provider.execute(
                    _variant(value=payload, claim=payload), timeout_s=10.0
                )
            except ProviderError as exc:
                failures.append((exc.code.value, payload))
                continue
            assert {r.key for r in term_rows} <= in_scope, payload
            for row in value_rows:
                source = by_key[row.key]
                assert source["art_category"] == payload == source["art_org"], payload
    finally:
        await provider.close()
    assert failures == []
    assert table_counts(pg_dsn, pg_schema) == before


def _variant(**slots: str) -> ValidatedQuery:
    """Optional terms (so payload terms alone decide the match) and an excluded payload."""
    return _issue(
        query_id="src-contract#1",
        source_id=CONTRACT_MAPPING.source_id,
        mapping=CONTRACT_MAPPING,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=(slots.get("optional", "solar"), "inverter"),
        excluded_terms=(slots.get("optional", "budget"),) if "optional" in slots else (),
        phrases=(),
        filters=(
            ResolvedFilter(
                "art_category", FieldType.TEXT, Operator.EQ, (slots.get("value", "energy"),)
            ),
        ),
        record_filters=(
            ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (slots.get("claim", "acme"),)),
        ),
        projection=(ProjectedField("title", "art_title"),),
        freshness=None,
        row_limit=50,
    )
