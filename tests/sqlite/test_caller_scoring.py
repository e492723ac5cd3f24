"""Tests for the caller-scored FTS5 ranking (``esra.sqlite._fulltext``): a query with record
conditions weighs each term by the idf of the rows the caller may see, not the whole index's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from esra.sqlite import SqliteFts5Provider
from esra.sqlite._fulltext import fts5_idf
from tests._bm25_corpus import (
    BODIES,
    HIDDEN,
    MAPPING,
    MINE,
    OWNED_COLUMNS,
    owned_rows,
    ranked_query,
)
from tests.sqlite.conftest import run_query, seed_database


def _database(path: Path, hidden: dict[str, str]) -> Path:
    """``BODIES`` owned by "me" and ``hidden`` by "them", in one FTS5-indexed table."""
    return seed_database(path, MAPPING, OWNED_COLUMNS, owned_rows(hidden))


def _ranking(
    path: Path, *, optional: Sequence[str] = (), phrases: Sequence[str] = (), mine: bool
) -> list[tuple[str, float]]:
    provider = SqliteFts5Provider(path, mappings=(MAPPING,))
    try:
        query = ranked_query(
            optional=optional, phrases=phrases, record_predicate=MINE if mine else None
        )
        return [(row.key, row.score) for row in run_query(provider, query)]
    finally:
        provider.close()


def test_fts5_idf_is_bm25s_own() -> None:
    """FTS5's idf (fts5_aux.c): ln((N − df + 0.5) / (df + 0.5)), never below 1e-6."""
    assert fts5_idf(10, 1) == math.log((10 - 1 + 0.5) / (1 + 0.5))
    assert fts5_idf(10, 5) == 1e-6  # ln(1) = 0: clamped
    assert fts5_idf(10, 9) == 1e-6
    assert fts5_idf(None, 3) is None


@pytest.mark.parametrize(
    ("optional", "phrases"),
    [(("zorb",), ()), (("zorb", "quil", "vemt"), ()), ((), ("zorb quil",)), (("dask",), ())],
)
def test_where_the_caller_sees_every_row_the_score_is_bm25s(
    tmp_path: Path, optional: tuple[str, ...], phrases: tuple[str, ...]
) -> None:
    """Reweighing by the caller's idf changes nothing where the caller may see every row:
    the same rows, order and scores as FTS5's bm25() of the whole query."""
    path = _database(tmp_path / "all-mine.db", {})
    scored = _ranking(path, optional=optional, phrases=phrases, mine=True)
    plain = _ranking(path, optional=optional, phrases=phrases, mine=False)
    assert scored
    assert [key for key, _ in scored] == [key for key, _ in plain]
    for (_, caller), (_, bm25) in zip(scored, plain, strict=True):
        assert caller == pytest.approx(bm25, rel=1e-12)


def test_the_words_of_rows_the_caller_may_not_see_never_move_its_ranking(
    tmp_path: Path,
) -> None:
    """Twenty hidden rows full of the query's words in one file, of other words in another:
    the caller's order and scores are the same in both. Scored by bm25() alone (no record
    conditions) the hidden words do move them — the channel this closes."""
    about_query = _database(tmp_path / "a.db", HIDDEN)
    elsewhere = _database(tmp_path / "b.db", dict.fromkeys(HIDDEN, "omeg omeg omeg omeg krat"))
    terms = ("zorb", "quil")
    first = _ranking(about_query, optional=terms, mine=True)
    second = _ranking(elsewhere, optional=terms, mine=True)
    assert {key for key, _ in first} == {
        k for k, b in BODIES.items() if {"zorb", "quil"} & set(b.split())
    }
    assert [key for key, _ in first] == [key for key, _ in second]
    for (_, one), (_, other) in zip(first, second, strict=True):
        assert one == pytest.approx(other, rel=1e-12)
    # The whole index's statistics differ between the files: what the reweighing removes.
    unweighed = [score for _, score in _ranking(about_query, optional=terms, mine=False)]
    assert unweighed != [score for _, score in _ranking(elsewhere, optional=terms, mine=False)]
