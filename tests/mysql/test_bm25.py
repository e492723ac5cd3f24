"""Tests for esra.mysql._bm25: a search's score is BM25 of the rows, on the real server.

The expected scores are computed here, in Python, from the rows' text: the same formula,
each word's occurrences counted in the text, ``N`` the rows of the table (InnoDB's own count,
the index built over all of them), each row's length its bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence

import pytest

from esra.core._config.mapping import FieldType
from tests._bm25_corpus import (
    BODIES,
    HIDDEN,
    K1,
    MAPPING,
    MINE,
    OWNED_COLUMNS,
    B,
    owned_rows,
    ranked_query,
)
from tests.mysql.conftest import (
    Server,
    close_now,
    create_database,
    drop_database,
    run_query,
    seed_table,
)

pytestmark = [pytest.mark.mysql, pytest.mark.integration]


def _expected_scores(
    optional: Sequence[str],
    required: Sequence[str],
    *,
    phrases: Sequence[str] = (),
    documents: int = len(BODIES),
) -> dict[str, float]:
    """BM25 of every row the query matches (each required term and phrase, else any term);
    every term scored; the statistics are of every row the caller may see, whatever the
    query requires, and ``documents`` is ``N``. A term of several words (``a b``, ``a-b``)
    occurs once where it is held: as written for a phrase, by any of its words if optional."""

    def occurrences(term: str, body: str, *, whole: bool) -> int:
        words = re.findall(r"\w+", term)
        if len(words) == 1:
            return body.split().count(term)
        held = term in body if whole else any(w in body.split() for w in words)
        return int(held)

    terms = [(t, True) for t in (*required, *phrases)] + [(t, False) for t in optional]
    counts = {
        key: {t: occurrences(t, body, whole=whole) for t, whole in terms}
        for key, body in BODIES.items()
    }
    matching = {t: [k for k in BODIES if counts[k][t]] for t, _ in terms}
    lengths = {key: len(body.encode()) for key, body in BODIES.items()}
    average = sum(lengths[k] for t, _ in terms for k in matching[t]) / sum(
        map(len, matching.values())
    )
    scores: dict[str, float] = {}
    for key in BODIES:
        held = all(counts[key][t] for t, whole in terms if whole)
        if not held or not any(counts[key][t] for t, _ in terms):
            continue
        score = 0.0
        for term, _ in terms:
            df, tf = len(matching[term]), counts[key][term]
            idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
            saturation = K1 * (1 - B + B * lengths[key] / average)
            score += idf * tf * (K1 + 1) / (tf + saturation)
        scores[key] = score
    return scores


@pytest.fixture(scope="module")
def ranked(server: Server) -> Iterator[str]:
    name = create_database(server)
    rows = [{"doc_key": key, "body": body} for key, body in BODIES.items()]
    seed_table(server, name, MAPPING, (("doc_key", FieldType.TEXT), ("body", FieldType.TEXT)), rows)
    yield name
    drop_database(server, name)


@pytest.mark.parametrize(
    ("optional", "required"),
    [
        (("zorb",), ()),
        (("zorb", "quil", "vemt"), ()),
        (("vemt", "dask"), ("plen",)),
        (("zorb", "unseen"), ()),
    ],
)
def test_the_score_is_bm25_of_the_rows(
    server: Server, ranked: str, optional: tuple[str, ...], required: tuple[str, ...]
) -> None:
    """Every row's score is BM25 (k1 1.2, b 0.75) with occurrences read back from InnoDB's
    relevance, N read back from it too, and the length pivoted on the average length of the
    rows each term matches; a word no row holds scores nothing. For ``zorb`` InnoDB's own
    relevance, linear in the count, ranked d6 first (eight in a long row); BM25 saturates
    the count and pivots on the length, and ranks d1 first (three in a short one)."""
    provider = server.provider(ranked, mappings=(MAPPING,))
    try:
        rows = run_query(provider, ranked_query(optional=optional, required=required))
    finally:
        close_now(provider)
    expected = _expected_scores(optional, required)
    assert {row.key for row in rows} == set(expected)
    for row in rows:
        assert row.score == pytest.approx(expected[row.key], rel=1e-12), row.key
    assert [row.key for row in rows] == sorted(expected, key=lambda k: (-expected[k], k))
    if optional == ("zorb",):
        assert rows[0].key == "d1"


@pytest.mark.parametrize(
    ("optional", "phrases"),
    [
        (("vemt",), ("zorb quil",)),
        (("quil-vemt", "dask"), ()),
        # ``qqqq`` is in no row: ``N`` is read back from the statement's other term.
        (("qqqq-vemt", "zorb"), ()),
    ],
)
def test_a_term_of_several_words_counts_once_where_it_is_held(
    server: Server, ranked: str, optional: tuple[str, ...], phrases: tuple[str, ...]
) -> None:
    """A phrase, or an optional term InnoDB reads as several words, is one ``MATCH`` whose
    relevance weighs its words by the index-wide idf: no count is read from it. It occurs
    once in a row that holds it (the phrase as written, an optional term by any word), its
    ``df`` counts those rows, and ``N`` is InnoDB's, read back from one word."""
    provider = server.provider(ranked, mappings=(MAPPING,))
    try:
        rows = run_query(provider, ranked_query(optional=optional, phrases=phrases))
    finally:
        close_now(provider)
    expected = _expected_scores(optional, (), phrases=phrases)
    assert {row.key for row in rows} == set(expected)
    for row in rows:
        assert row.score == pytest.approx(expected[row.key], rel=1e-12), row.key


def test_rows_the_caller_may_not_see_never_count_in_a_words_statistics(server: Server) -> None:
    """``df`` and the average length are counted over the rows the caller's record conditions
    admit, so the words of rows hidden from it (another tenant's, another organisation's)
    never move its order; ``N`` stays InnoDB's count of the index (a volume, no row's
    words)."""
    name = create_database(server)
    try:
        seed_table(server, name, MAPPING, OWNED_COLUMNS, owned_rows(HIDDEN))
        provider = server.provider(name, mappings=(MAPPING,))
        try:
            found = run_query(
                provider, ranked_query(optional=("zorb", "quil"), record_predicate=MINE)
            )
        finally:
            close_now(provider)
    finally:
        drop_database(server, name)
    expected = _expected_scores(("zorb", "quil"), (), documents=len(BODIES) + len(HIDDEN))
    assert {row.key for row in found} == set(expected)
    for row in found:
        assert row.score == pytest.approx(expected[row.key], rel=1e-12), row.key
