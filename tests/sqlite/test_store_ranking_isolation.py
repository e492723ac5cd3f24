"""The words of documents a caller may not see, against its ranking (``tests._store_ranking``),
on SQLite's store (FTS5)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from esra.sqlite import SqliteDocumentRepository, SqliteFts5Provider, store_source
from tests._store_ranking import (
    ACME,
    ACME_DOCUMENTS,
    HIDDEN_ABOUT_ALPHA,
    HIDDEN_ABOUT_OMEGA,
    HIDING_PLACES,
    SCOPE,
    ranking_query,
)

pytestmark = pytest.mark.integration


async def _store(path: Path) -> Path:
    """A store file with its schema applied and no documents."""
    repository = SqliteDocumentRepository(path)
    await repository.initialize()
    await repository.close()
    return repository.path


def _index(path: Path, tenant: str, scope: str, bodies: dict[str, str]) -> None:
    """Store each body as an indexed one-segment document of ``tenant`` in ``scope`` (the
    segments' trigger puts it in the FTS5 index)."""
    with sqlite3.connect(path) as connection:
        for key, body in bodies.items():
            connection.execute(
                "INSERT INTO store_documents (id, tenant_id, title, format, sha256, size, scope,"
                " state, created_at, updated_at) VALUES (?, ?, ?, 'txt', ?, 1, ?, 'indexed',"
                " '2026-12-06T00:00:00+00:00', '2026-12-06T00:00:00+00:00')",
                (key, tenant, key, key, scope),
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


@HIDING_PLACES
async def test_the_words_of_documents_a_caller_may_not_see_never_move_its_ranking(
    tmp_path: Path, hidden_tenant: str, hidden_scope: str
) -> None:
    """Beside Acme's documents, thirty the caller may not see, about alpha in one store and
    about omega in the other: Acme's order is the same in both, its scores too (to the
    rounding of dividing out a different index-wide idf), and its alpha document, the rarer
    word among what it sees, ranks first."""
    rankings = []
    for name, hidden in (("alpha", HIDDEN_ABOUT_ALPHA), ("omega", HIDDEN_ABOUT_OMEGA)):
        store = await _store(tmp_path / f"{name}.sqlite3")
        _index(store, ACME, SCOPE, ACME_DOCUMENTS)
        _index(store, hidden_tenant, hidden_scope, hidden)
        rankings.append(await _acme_ranking(store))
    about_alpha, about_omega = rankings
    assert [key for key, _ in about_alpha][:1] == ["acme-alpha"]
    assert [key for key, _ in about_alpha] == [key for key, _ in about_omega]
    for (_, alpha_score), (_, omega_score) in zip(about_alpha, about_omega, strict=True):
        assert alpha_score == pytest.approx(omega_score, rel=1e-12)
