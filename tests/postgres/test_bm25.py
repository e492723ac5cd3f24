"""Tests for esra.postgres._bm25: a search's score is BM25 of the rows, on the real server.

The expected scores are computed here, in Python, from the rows' text: the same formula,
occurrences counted in the text and read back as the statement reads them, each row's length
the number of its distinct words (the server's ``length(tsvector)``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import attrs
import pytest
from psycopg import sql

from esra.core._config.mapping import FieldType, Mapping
from esra.sql import BuiltStatement
from tests._bm25_corpus import (
    BODIES,
    FILLER,
    HIDDEN,
    K1,
    MAPPING,
    MINE,
    OWNED_COLUMNS,
    B,
    owned_rows,
    ranked_query,
)
from tests.postgres.conftest import admin, make_provider, scan_nodes, seed_table

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

_ZETA_2 = math.pi**2 / 6


def _float4(value: float) -> float:
    """``value`` rounded to PostgreSQL's ``real``, which ``ts_rank`` returns."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _read_back(occurrences: int) -> float:
    """The occurrences the statement reads back from ``ts_rank`` of one lexeme."""
    rank = _float4(sum(1 / j**2 for j in range(1, occurrences + 1)) / _ZETA_2)
    return rank / (_ZETA_2 * (1 - rank)) if occurrences else 0.0


def _occurrences(body: str, term: str) -> int:
    words, wanted = body.split(), term.split()
    return sum(words[i : i + len(wanted)] == wanted for i in range(len(words)))


def _expected_scores(
    optional: Sequence[str], phrases: Sequence[str], *, documents: int = len(BODIES)
) -> dict[str, float]:
    """BM25 of every row the query matches: each phrase (required) and, without phrases, a
    term; every term and phrase scored, a phrase as one occurrence. ``documents`` is ``N``."""
    lengths = {key: len(set(body.split())) for key, body in BODIES.items()}
    terms = [*phrases, *optional]  # required and phrases are scored before optional terms
    matching = {t: [k for k, body in BODIES.items() if _occurrences(body, t)] for t in terms}
    average = sum(lengths[k] for t in terms for k in matching[t]) / sum(map(len, matching.values()))
    scores: dict[str, float] = {}
    for key, body in BODIES.items():
        if not all(key in matching[p] for p in phrases):
            continue
        if not any(key in matching[t] for t in terms):
            continue
        score = 0.0
        for term in terms:
            df = len(matching[term])
            idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
            count = _occurrences(body, term)
            tf = _read_back(count) if " " not in term else float(count > 0)
            saturation = K1 * (1 - B + B * lengths[key] / average)
            score += idf * tf * (K1 + 1) / (tf + saturation)
        scores[key] = score
    return scores


@pytest.fixture
def ranked(pg_dsn: str, pg_schema: str) -> str:
    rows = [{"doc_key": key, "body": body} for key, body in BODIES.items()]
    columns = (("doc_key", FieldType.TEXT), ("body", FieldType.TEXT))
    seed_table(pg_dsn, pg_schema, MAPPING, columns, rows)
    return pg_schema


def test_occurrences_are_read_back_from_ts_rank(pg_dsn: str) -> None:
    """The server's ts_rank of one lexeme, every weight 1, no normalisation, is H(tf)/ζ(2),
    from which r / (ζ(2)(1 − r)) recovers tf to within 0.11, up to the 256 positions a
    lexeme keeps. Holds the reading the score is built on to the server it runs on."""
    with admin(pg_dsn) as conn:
        for occurrences in (*range(1, 41), 100, 255):
            text = "zorb " * occurrences + FILLER
            row = conn.execute(
                "SELECT ts_rank(CAST('{1,1,1,1}' AS float4[]), to_tsvector('simple', %s),"
                " plainto_tsquery('simple', 'zorb'), 0)",
                (text,),
            ).fetchone()
            assert row is not None
            rank = row[0]
            assert isinstance(rank, float)
            assert abs(rank / (_ZETA_2 * (1 - rank)) - occurrences) < 0.11, occurrences


@pytest.mark.parametrize(
    ("optional", "phrases"),
    [
        (("zorb",), ()),
        (("zorb", "quil", "vemt"), ()),
        (("vemt", "plen"), ("zorb quil",)),
    ],
)
async def test_the_score_is_bm25_of_the_rows(
    pg_dsn: str, ranked: str, optional: tuple[str, ...], phrases: tuple[str, ...]
) -> None:
    """Every row's score is BM25 (k1 1.2, b 0.75) with the length pivoted on the average
    length of the rows each term matches; a phrase counts as one occurrence."""
    provider = make_provider(pg_dsn, ranked, mappings=(MAPPING,))
    try:
        rows = await provider.execute(ranked_query(optional=optional, phrases=phrases), timeout_s=5)
    finally:
        await provider.close()
    expected = _expected_scores(optional, phrases)
    assert {row.key for row in rows} == set(expected)
    for row in rows:
        assert row.score == pytest.approx(expected[row.key], rel=1e-5), row.key
    assert [row.key for row in rows] == sorted(expected, key=lambda k: (-expected[k], k))


async def test_rows_the_caller_may_not_see_never_count_in_a_words_statistics(
    pg_dsn: str, pg_schema: str
) -> None:
    """``df`` and the average length are counted over the rows the caller's record conditions
    admit, so the words of rows hidden from it (another tenant's, another scope's) never move
    its order; ``N`` stays the relation's row count (a volume, no word of any row)."""
    seed_table(pg_dsn, pg_schema, MAPPING, OWNED_COLUMNS, owned_rows(HIDDEN))
    query = ranked_query(optional=("zorb", "quil"), record_predicate=MINE)
    provider = make_provider(pg_dsn, pg_schema, mappings=(MAPPING,))
    try:
        found = await provider.execute(query, timeout_s=5)
    finally:
        await provider.close()
    expected = _expected_scores(("zorb", "quil"), (), documents=len(BODIES) + len(HIDDEN))
    assert {row.key for row in found} == set(expected)
    for row in found:
        assert row.score == pytest.approx(expected[row.key], rel=1e-5), row.key


def _view_mapping() -> Mapping:
    return attrs.evolve(MAPPING, id="bm25_view", relation="bm25_view")


def _counting_scans(dsn: str, schema: str, built: BuiltStatement) -> list[str]:
    """The scans of the statement's run that read the base table without a text match:
    counting its rows for ``N`` (the ``df`` counts and the search itself all match ``@@``)."""
    conditions = ("Filter", "Index Cond", "Recheck Cond")
    return [
        str(node["Node Type"])
        for node in scan_nodes(dsn, schema, built, executed=True)
        if node.get("Relation Name") == MAPPING.relation
        and int(node.get("Actual Loops", 0)) > 0
        and not any("@@" in str(node.get(key, "")) for key in conditions)
    ]


async def test_a_view_takes_the_count_kept_for_the_table_it_reads(pg_dsn: str, ranked: str) -> None:
    """A view keeps no row count; counting it scanned everything it reads on every search
    (the document store's view of 1,000,000 segments: 760 ms). Its N is now the count kept
    for the largest table it reads: not counted once that table is analysed, and ranked as
    the table itself ranks."""
    view = sql.Identifier(ranked, "bm25_view")
    table = sql.Identifier(ranked, MAPPING.relation)
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(view, table))
        # As a table never vacuumed or analysed (CREATE INDEX had counted it).
        conn.execute(
            "UPDATE pg_catalog.pg_class SET reltuples = -1 WHERE oid = %s::regclass",
            (f'"{ranked}"."{MAPPING.relation}"',),
        )
    query = ranked_query(optional=("zorb", "vemt"))
    through_view = ranked_query(optional=("zorb", "vemt"), mapping=_view_mapping())
    provider = make_provider(pg_dsn, ranked, mappings=(MAPPING, _view_mapping()))
    try:
        built = provider.builder.build(through_view)
        assert _counting_scans(pg_dsn, ranked, built)  # nothing kept: counted
        with admin(pg_dsn) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(table))
        assert _counting_scans(pg_dsn, ranked, built) == []
        viewed = [(r.key, r.score) for r in await provider.execute(through_view, timeout_s=5)]
        direct = [(r.key, r.score) for r in await provider.execute(query, timeout_s=5)]
    finally:
        await provider.close()
    assert viewed == direct
    assert viewed
