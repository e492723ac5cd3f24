"""The injection property for MySQL / MariaDB, proved with ~19,000 real SQL-injection payloads.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the builder and the provider must be safe even for a
future code path that forgets the validator. PyMySQL interpolates values into the command on
the client, escaped for the connection; the rendered text compared here is what comes before
that step, and the live run proves the escaped values stay literals.
"""

from __future__ import annotations

import asyncio

import pytest

from esra.core.config.mapping import FieldType, Operator
from esra.core.exceptions import ProviderError
from esra.core.query import ProjectedField, ResolvedFilter, Strategy
from esra.core.testing.contract import CONTRACT_MAPPING, CONTRACT_ROWS
from esra.core.validation import ValidatedQuery, _issue
from esra.mysql import MatchAgainstFullText, ServerFlavor, with_timeout
from esra.mysql._quote import DIALECT
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._external import load_sqli_payloads
from tests.mysql.conftest import Server, table_counts

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
    excluded: str = "budget",
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
        excluded_terms=(excluded,),
        phrases=(phrase,),
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (value,)),),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (claim,)),),
        projection=(ProjectedField("title", "art_title"), ProjectedField("body", "Art Body")),
        freshness=ProjectedField("published", "art_published"),
        row_limit=50,
    )


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """Each payload in the required, optional, excluded, phrase, filter and claim slots leaves
    the uncached command text — bounded for MariaDB and for MySQL 8 — byte-identical."""
    builder = StatementBuilder(DIALECT, MatchAgainstFullText(), cache=CompiledStatementCache(0))
    benign = builder.compile(_query()).sql
    bounded = {f: with_timeout(benign, f, 2.5).encode() for f in ServerFlavor}
    slots = ("required", "optional", "phrase", "excluded", "value", "claim")
    for payload in payloads:
        together = builder.compile(_query(**dict.fromkeys(slots, payload))).sql
        assert together.encode() == benign.encode(), payload
        for flavor in ServerFlavor:
            assert with_timeout(together, flavor, 2.5).encode() == bounded[flavor]
    for payload in payloads[::100]:
        for slot in slots:
            alone = builder.compile(_query(**{slot: payload}))
            assert alone.sql.encode() == benign.encode(), (slot, payload)


@pytest.mark.mysql
@pytest.mark.integration
async def test_executing_every_payload_is_inert(
    server: Server, contract_database: str, payloads: list[str]
) -> None:
    """As a search term and as filter/claim values: no unclassified error, no row outside the
    benign predicate's scope, and every table's row count unchanged."""
    before = table_counts(server, contract_database)
    in_scope = {
        str(r["art_key"])
        for r in CONTRACT_ROWS
        if r["art_category"] == "energy" and r["art_org"] == "acme"
    }
    by_key = {str(r["art_key"]): r for r in CONTRACT_ROWS}
    provider = server.provider(contract_database, pool_size=4)
    failures: list[tuple[str, str]] = []
    try:
        for payload in payloads:
            as_terms = _query(required="solar", optional=payload, phrase="solar", excluded=payload)
            as_required = _query(required=payload, phrase=payload)
            as_value = _query(value=payload, claim=payload)
            # The three run concurrently on the pool: one payload's batch at a time.
            outcomes = await asyncio.gather(
                *(provider.execute(q, timeout_s=10.0) for q in (as_terms, as_required, as_value)),
                return_exceptions=True,
            )
            for index, outcome in enumerate(outcomes):
                if isinstance(outcome, ProviderError):
                    failures.append((outcome.code.value, payload))
                    continue
                assert not isinstance(outcome, BaseException), (payload, outcome)
                if index == 2:
                    for row in outcome:
                        source = by_key[row.key]
                        assert source["art_category"] == payload == source["art_org"], payload
                else:
                    assert {r.key for r in outcome} <= in_scope, payload
    finally:
        await provider.close()
    assert failures == []
    assert table_counts(server, contract_database) == before
