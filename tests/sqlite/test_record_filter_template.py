"""A record-filter template applied by the real SQLite provider, in the executed query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from esra.sqlite import SqliteFts5Provider
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
from tests.sqlite.conftest import seed_database, table_counts


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """The template dataset in a fresh database file, with its FTS5 index."""
    return seed_database(tmp_path / "rt.db", MAPPING, COLUMNS, ROWS)


@pytest.fixture
def provider(database: Path) -> Iterator[SqliteFts5Provider]:
    """A provider over ``database``, closed after the test."""
    provider = SqliteFts5Provider(database, mappings=(MAPPING,))
    yield provider
    provider.close()


@pytest.mark.parametrize("caller", CALLERS, ids=lambda c: c.name)
async def test_each_caller_sees_exactly_the_rows_the_template_admits(
    provider: SqliteFts5Provider, caller: Caller
) -> None:
    """Different claims, different rows — decided by the database, NULLs included."""
    assert await visible_keys(provider, caller.claims) == caller.expected


async def test_injection_payloads_as_claims_see_nothing_and_break_nothing(
    provider: SqliteFts5Provider, database: Path
) -> None:
    """A payload in every claim matches no row, raises nothing, and changes no table."""
    before = table_counts(database)
    ran = await assert_payloads_see_nothing(provider, CLASSIC_PAYLOADS + DROPPED_PAYLOADS)
    assert ran == len(CLASSIC_PAYLOADS)
    assert table_counts(database) == before
    alice = CALLERS[0]
    assert await visible_keys(provider, alice.claims) == alice.expected


@pytest.mark.external_data
async def test_the_sqli_corpus_as_claims_sees_nothing(
    provider: SqliteFts5Provider, database: Path
) -> None:
    """A spread of the public corpus, as both claims, returns no row and alters nothing."""
    before = table_counts(database)
    assert await assert_payloads_see_nothing(provider, load_sqli_payloads()[::20]) > 0
    assert table_counts(database) == before
