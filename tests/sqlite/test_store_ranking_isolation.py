"""The cross-tenant ranking channel (``tests._store_ranking``) on SQLite's store (FTS5)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from esra.sqlite import SqliteDocumentRepository, SqliteFts5Provider, store_source
from tests._store_ranking import (
    ACME,
    ACME_DOCUMENTS,
    GLOBEX,
    GLOBEX_DOCUMENTS,
    KNOWN_CHANNEL,
    SCOPE,
    ranking_query,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def store(tmp_path: Path) -> Path:
    """A store file with its schema applied and no documents."""
    repository = SqliteDocumentRepository(tmp_path / "store.sqlite3")
    await repository.initialize()
    await repository.close()
    return repository.path


def _index(path: Path, tenant: str, bodies: dict[str, str]) -> None:
    """Store each body as an indexed one-segment document of ``tenant`` under its key (the
    segments' trigger puts it in the FTS5 index)."""
    with sqlite3.connect(path) as connection:
        for key, body in bodies.items():
            connection.execute(
                "INSERT INTO store_documents (id, tenant_id, title, format, sha256, size, scope,"
                " state, created_at, updated_at) VALUES (?, ?, ?, 'txt', ?, 1, ?, 'indexed',"
                " '2026-12-06T00:00:00+00:00', '2026-12-06T00:00:00+00:00')",
                (key, tenant, key, key, SCOPE),
            )
            connection.execute(
                "INSERT INTO store_segments (document_id, ordinal, label, body, indexed_text)"
                " VALUES (?, 0, 'part 0', ?, ?)",
                (key, body, body),
            )
    connection.close()


async def _acme_ranking(path: Path) -> list[tuple[str, float]]:
    _, mapping = store_source(ACME)
    provider = SqliteFts5Provider(path, mappings=(mapping,))
    try:
        rows = await provider.execute(ranking_query(mapping), timeout_s=10.0)
    finally:
        provider.close()
    return [(row.key, row.score) for row in rows]


@KNOWN_CHANNEL
async def test_another_tenants_documents_never_move_a_tenants_ranking(store: Path) -> None:
    """Acme's alpha document ranks first; once Globex indexes thirty documents about alpha,
    nothing of Globex's may change Acme's order or scores."""
    _index(store, ACME, ACME_DOCUMENTS)
    before = await _acme_ranking(store)
    assert [key for key, _ in before][:1] == ["acme-alpha"]
    _index(store, GLOBEX, GLOBEX_DOCUMENTS)
    assert await _acme_ranking(store) == before
