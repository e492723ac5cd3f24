"""A record-filter template applied by the real MySQL / MariaDB provider, in the query."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from esra.mysql import MySqlProvider
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
    visible_keys,
)
from tests.mysql.conftest import Server, close_now, seed_table, table_counts

pytestmark = [pytest.mark.mysql, pytest.mark.integration]


@pytest.fixture(scope="module")
def seeded(server: Server, database: str) -> str:
    """``database`` holding the template dataset (a real InnoDB table, FULLTEXT-indexed)."""
    seed_table(server, database, MAPPING, COLUMNS, ROWS)
    return database


@pytest.fixture
def provider(server: Server, seeded: str) -> Iterator[MySqlProvider]:
    """A provider over the seeded database, closed after the test."""
    provider = server.provider(seeded, mappings=(MAPPING,))
    yield provider
    close_now(provider)


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: c.name)
async def test_each_caller_sees_exactly_the_rows_the_template_admits(
    provider: MySqlProvider, caller: Caller
) -> None:
    """Different claims, different rows — decided by the server, NULLs included."""
    assert await visible_keys(provider, caller.claims) == caller.expected


async def test_injection_payloads_as_claims_see_nothing_and_break_nothing(
    provider: MySqlProvider, server: Server, seeded: str
) -> None:
    """A payload in every claim matches no row, raises nothing, and changes no table.

    The dropped payloads matter most here: ``utf8mb4_unicode_ci`` ignores NUL and zero-width
    characters, so ``'\\x00emea'`` would equal ``'emea'`` if the validator bound it.
    """
    before = table_counts(server, seeded)
    ran = await assert_payloads_see_nothing(provider, CLASSIC_PAYLOADS + DROPPED_PAYLOADS)
    assert ran == len(CLASSIC_PAYLOADS)
    assert table_counts(server, seeded) == before
    alice = CALLERS[0]
    assert await visible_keys(provider, alice.claims) == alice.expected


@pytest.mark.external_data
async def test_the_sqli_corpus_as_claims_sees_nothing(
    provider: MySqlProvider, server: Server, seeded: str
) -> None:
    """A spread of the public corpus, as both claims, returns no row and alters nothing."""
    before = table_counts(server, seeded)
    assert await assert_payloads_see_nothing(provider, load_sqli_payloads()[::20]) > 0
    assert table_counts(server, seeded) == before
