"""The injection property for MySQL / MariaDB, proved with ~19,000 real SQL-injection payloads.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads for their ``;``/``--``): the builder and the provider must be safe even for a
future code path that forgets the validator. The rendered text compared here is the text the
server prepares (with each ``%(name)s`` as ``?``); the values travel apart from it as
parameters of the prepared statement (``test_values_are_parameters.py``), and the live run
proves they match as data.
"""

from __future__ import annotations

import asyncio

import pytest

from esra.core._pipeline.values import ValidatedQuery
from esra.core.exceptions import ProviderError
from esra.mysql import MatchAgainstFullText
from esra.mysql._quote import DIALECT
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._external import load_sqli_payloads
from tests._injection import (
    IN_SCOPE,
    SLOTS,
    assert_every_slot_compiles_to_the_benign_text,
    assert_value_rows_match_exactly,
    payload_query,
)
from tests.mysql.conftest import Server, table_counts

pytestmark = pytest.mark.external_data


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def _query(*, excluded: str = "budget", **slots: str) -> ValidatedQuery:
    """Every slot filled, the excluded term one of them."""
    return payload_query(excluded=(excluded,), **slots)


def _uncached_builder() -> StatementBuilder:
    return StatementBuilder(DIALECT, MatchAgainstFullText(), cache=CompiledStatementCache(0))


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """Each payload in the required, optional, excluded, phrase, filter and claim slots leaves
    the uncached command text byte-identical, so the text bounded for MariaDB and for MySQL 8
    (a function of that text alone) is too."""
    slots = (*SLOTS, "excluded")
    assert_every_slot_compiles_to_the_benign_text(_uncached_builder, _query, payloads, slots=slots)


@pytest.mark.mysql
@pytest.mark.integration
async def test_executing_every_payload_is_inert(
    server: Server, contract_database: str, payloads: list[str]
) -> None:
    """As a search term and as filter/claim values: no unclassified error, no row outside the
    benign predicate's scope, and every table's row count unchanged."""
    before = table_counts(server, contract_database)
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
                    assert_value_rows_match_exactly(outcome, payload)
                else:
                    assert {r.key for r in outcome} <= IN_SCOPE, payload
    finally:
        await provider.close()
    assert failures == []
    assert table_counts(server, contract_database) == before
