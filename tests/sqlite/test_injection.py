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

from esra.sql import CompiledStatementCache, StatementBuilder
from esra.sqlite import Fts5FullText, SqliteFts5Provider
from tests._external import load_sqli_payloads
from tests._injection import (
    assert_every_slot_compiles_to_the_benign_text,
    execute_payloads,
    payload_query,
)
from tests.sqlite.conftest import seed_contract_database, table_counts

pytestmark = pytest.mark.external_data


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def test_payload_file_is_the_documented_one(payloads: list[str]) -> None:
    """The payload list is the ~19k-line combined file, hostile lines included."""
    assert len(payloads) > 19_000
    assert any("DROP" in p.upper() for p in payloads)
    assert any(";" in p for p in payloads)
    assert any(any(0xDC80 <= ord(ch) <= 0xDCFF for ch in p) for p in payloads)


def _uncached_builder() -> StatementBuilder:
    return StatementBuilder(
        sqlite_dialect.dialect(paramstyle="named"), Fts5FullText(), cache=CompiledStatementCache(0)
    )


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """Each payload in the required, optional, phrase, filter and claim slots leaves the
    uncached command text byte-identical to the benign query's."""
    assert_every_slot_compiles_to_the_benign_text(_uncached_builder, payload_query, payloads)


async def test_executing_every_payload_is_inert(tmp_path: Path, payloads: list[str]) -> None:
    """As a term and as filter/claim values, no payload raises, widens the result, or writes.

    Term payloads run with benign filters (category energy, org acme): every row returned
    must satisfy them. Value payloads run as the category filter and the org claim: a row
    may come back only if its stored values equal the payload exactly.
    """
    path = seed_contract_database(tmp_path / "inj.db")
    before = table_counts(path)
    provider = SqliteFts5Provider(path, pool_size=2)
    try:
        failures = await execute_payloads(provider, payloads)
    finally:
        provider.close()
    assert failures == []
    assert table_counts(path) == before
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()
