"""Shared helpers for the SQLite tests: seed a database from a dataset, open providers."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from sqlalchemy.dialects import sqlite as sqlite_dialect

from esra.core._config.mapping import FieldType
from esra.core._config.mapping import Mapping as EsraMapping
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core.testing.contract import CONTRACT_DATASET, ContractDataset
from esra.sqlite import SqliteFts5Provider, create_fts5_index

_SQL_TYPES = {
    FieldType.TEXT: "TEXT",
    FieldType.INTEGER: "INTEGER",
    FieldType.NUMBER: "REAL",
    FieldType.BOOLEAN: "INTEGER",
    FieldType.DATE: "TEXT",
}

_quote = sqlite_dialect.dialect().identifier_preparer.quote_identifier


def seed_database(
    path: Path,
    mapping: EsraMapping,
    columns: Sequence[tuple[str, FieldType]],
    rows: Sequence[Mapping[str, object]],
    *,
    with_index: bool = True,
) -> Path:
    """Create ``mapping.relation`` with ``columns``, insert ``rows``, and index it with FTS5."""
    names = [name for name, _ in columns]
    table = _quote(mapping.relation)
    ddl = ", ".join(f"{_quote(name)} {_SQL_TYPES[kind]}" for name, kind in columns)
    placeholders = ", ".join("?" for _ in names)
    with sqlite3.connect(path) as connection:
        connection.execute(f"CREATE TABLE {table} ({ddl})")
        connection.executemany(
            f"INSERT INTO {table} ({', '.join(map(_quote, names))}) VALUES ({placeholders})",
            [tuple(row[name] for name in names) for row in rows],
        )
        if with_index:
            create_fts5_index(connection, mapping)
    connection.close()
    return path


def seed_contract_database(path: Path, dataset: ContractDataset = CONTRACT_DATASET) -> Path:
    """Seed the provider contract suite's standard dataset into ``path``."""
    return seed_database(path, dataset.mapping, dataset.columns, dataset.rows)


def table_counts(path: Path) -> dict[str, int]:
    """Return the row count of every table (FTS shadow tables included)."""
    with sqlite3.connect(path) as connection:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        counts = {
            name: int(connection.execute(f"SELECT count(*) FROM {_quote(name)}").fetchone()[0])
            for name in names
        }
    connection.close()
    return counts


def run_query(
    provider: SqliteFts5Provider, query: ValidatedQuery, timeout_s: float = 10.0
) -> list[ResultRow]:
    """Execute ``query`` from synchronous code (hypothesis tests) on a fresh event loop."""
    return list(asyncio.run(provider.execute(query, timeout_s=timeout_s)))


@pytest.fixture
def contract_db(tmp_path: Path) -> Path:
    """A database file holding the contract dataset and its FTS5 index."""
    return seed_contract_database(tmp_path / "contract.db")


@pytest.fixture
def provider(contract_db: Path) -> Iterator[SqliteFts5Provider]:
    """A provider over ``contract_db``, closed after the test."""
    provider = SqliteFts5Provider(contract_db, mappings=(CONTRACT_DATASET.mapping,))
    yield provider
    provider.close()
