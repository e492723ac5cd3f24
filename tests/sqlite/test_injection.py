"""The injection property, proved with ~19,000 real SQL-injection payloads.

Payloads come from ``sqli/_combined_unique_payloads.txt`` under the shared data folder
(``ESRA_SHARED_DATA``, default ``../shared/data`` beside the repository), read in place. The
file is read as bytes and every line decoded with ``errors="surrogateescape"``: undecodable
lines are *kept*, as strings with lone surrogates, because hostile input arrives that way
too; only empty lines are dropped.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the point is that the builder and the provider are
safe even for a future code path that forgets the validator.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.dialects import sqlite as sqlite_dialect

from esra.core.config.mapping import FieldType, Operator
from esra.core.exceptions import ProviderError
from esra.core.query import ProjectedField, ResolvedFilter, Strategy
from esra.core.testing.contract import CONTRACT_MAPPING, CONTRACT_ROWS
from esra.core.validation import ValidatedQuery, _issue
from esra.sql import CompiledStatementCache, StatementBuilder
from esra.sqlite import Fts5FullText, SqliteFts5Provider
from tests._external import load_sqli_payloads
from tests.sqlite.conftest import seed_contract_database, table_counts

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
        excluded_terms=(),
        phrases=(phrase,),
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (value,)),),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (claim,)),),
        projection=(ProjectedField("title", "art_title"), ProjectedField("body", "Art Body")),
        freshness=ProjectedField("published", "art_published"),
        row_limit=50,
    )


def test_payload_file_is_the_documented_one(payloads: list[str]) -> None:
    """The payload list is the ~19k-line combined file, hostile lines included."""
    assert len(payloads) > 19_000
    assert any("DROP" in p.upper() for p in payloads)
    assert any(";" in p for p in payloads)
    assert any(any(0xDC80 <= ord(ch) <= 0xDCFF for ch in p) for p in payloads)


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """Each payload in the required, optional, phrase, filter and claim slots leaves the
    uncached command text byte-identical to the benign query's."""
    builder = StatementBuilder(
        sqlite_dialect.dialect(paramstyle="named"), Fts5FullText(), cache=CompiledStatementCache(0)
    )
    benign = builder.compile(_query()).sql.encode()
    slots = ("required", "optional", "phrase", "value", "claim")
    for payload in payloads:
        # All five slots at once: the text may depend on none of them.
        together = builder.compile(_query(**dict.fromkeys(slots, payload)))
        assert together.sql.encode() == benign, payload
    # And each slot alone, over a spread of the list, to rule out slots masking each other.
    for payload in payloads[::100]:
        for slot in slots:
            alone = builder.compile(_query(**{slot: payload}))
            assert alone.sql.encode() == benign, (slot, payload)


async def test_executing_every_payload_is_inert(tmp_path: Path, payloads: list[str]) -> None:
    """As a term and as filter/claim values, no payload raises, widens the result, or writes.

    Term payloads run with benign filters (category energy, org acme): every row returned
    must satisfy them. Value payloads run as the category filter and the org claim: a row
    may come back only if its stored values equal the payload exactly.
    """
    path = seed_contract_database(tmp_path / "inj.db")
    before = table_counts(path)
    in_scope = {
        str(r["art_key"])
        for r in CONTRACT_ROWS
        if r["art_category"] == "energy" and r["art_org"] == "acme"
    }
    by_key = {str(r["art_key"]): r for r in CONTRACT_ROWS}
    provider = SqliteFts5Provider(path, pool_size=2)
    failures: list[tuple[str, str]] = []
    try:
        for payload in payloads:
            as_term = _issue_variant(optional=payload)
            as_value = _issue_variant(value=payload, claim=payload)
            try:
                term_rows = await provider.execute(as_term, timeout_s=10.0)
                value_rows = await provider.execute(as_value, timeout_s=10.0)
            except ProviderError as exc:
                failures.append((exc.code.value, payload))
                continue
            assert {r.key for r in term_rows} <= in_scope, payload
            for row in value_rows:
                source = by_key[row.key]
                assert source["art_category"] == payload == source["art_org"], payload
    finally:
        provider.close()
    assert failures == []
    assert table_counts(path) == before
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()


def _issue_variant(**slots: str) -> ValidatedQuery:
    """A keyword query: optional terms only (so payload terms alone decide the match)."""
    return _issue(
        query_id="src-contract#1",
        source_id=CONTRACT_MAPPING.source_id,
        mapping=CONTRACT_MAPPING,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=(slots.get("optional", "solar"), "inverter"),
        excluded_terms=(),
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
