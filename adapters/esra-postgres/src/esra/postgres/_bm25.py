"""BM25 over a ``tsvector`` column, computed inside the search statement.

PostgreSQL ranks full text with ``ts_rank``, which knows nothing of the collection and
normalises length by a logarithm; ESRA's SQLite and MySQL providers rank with BM25 (FTS5's
``bm25()``; MySQL's read from InnoDB's relevance). On the five test collections ``ts_rank`` — even
weighted by an idf — ranked 0.531 nDCG@10 against BM25's 0.557, most of it on CACM
(0.399 against 0.495), whose records range from a title alone to a long abstract. This
module scores every row with BM25 itself, with the parameters FTS5's ``bm25()`` and the
``LocalModel``'s rerank use (``k1`` 1.2, ``b`` 0.75)::

    score = Σ_t idf(t) × tf × (k1 + 1) / (tf + k1 × (1 − b + b × dl / avgdl))
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))

Each part comes from something PostgreSQL already keeps or computes cheaply:

- ``tf``, a term's occurrences in the row, is read back from ``ts_rank`` of that one term
  with every weight 1 and no normalisation. PostgreSQL computes it (``calc_rank_or``) as
  ``H(tf) / ζ(2)`` with ``H(tf) = Σ_{j≤tf} 1/j²``, so ``r / (ζ(2) × (1 − r))`` recovers
  ``tf`` to within 0.11 (0.94 for one occurrence, 1.92 for two, 9.90 for ten) and is 0 when
  the term does not occur. A lexeme keeps at most 256 positions, so ``r`` stays below
  0.998 and the division is safe. A term of several lexemes (a phrase, a hyphenated word)
  is ranked by proximity instead (``calc_rank_and``), which is no count: its match counts
  as one occurrence.
- ``dl``, the row's length, is its number of distinct lexemes (``length(tsvector)``), the
  "unique terms" length of pivoted normalisation; ``avgdl`` is the average over the rows
  each scored term matches, summed over the terms, counted in the pass that counts ``df``.
  BM25's pivot needs an average, not the exact one: when this was chosen, the table's own
  average (a scan per search), the average of the rows the statement scores and this one
  ranked the five collections within 0.0015 nDCG@10 of each other.
- ``N`` is the row count PostgreSQL keeps for the relation (``pg_class.reltuples``, counted
  only when it has none) and each ``df`` an indexed ``@@`` count, in one derived row
  evaluated once per statement (an uncorrelated subquery fenced with ``OFFSET 0``).

``df`` and ``avgdl`` are counted over the rows the caller may see: the ``df`` passes carry
the query's record filters and record-filter template (``TextTarget.visible``, bound under
the same names as in the statement's ``WHERE``). Counted over the whole relation, they let
the words of rows hidden from the caller — another tenant's documents in the store, its own
documents of a scope it lacks — reorder the rows it sees (``docs/security.md``). ``N`` stays
the relation's: a volume, no row's words, and counting the caller's rows instead would scan
all of them on every search. Restricting the passes also makes them cheaper where the
conditions are selective (the store's search: 6.1 → 2.8 ms p50 at 100,000 segments, 125 →
86 ms at 1,000,000).

Each part is computed once where it varies: the terms' weights and tsqueries once per
statement in that row, a row's length saturation and each term's occurrences once per row
in a ``LATERAL`` subquery fenced the same way (unfenced, PostgreSQL pulls it up and
evaluates ``ts_rank`` once per reference). The cost over ``ts_rank`` is reading each
matching row's vector once more for ``avgdl``: about 10 % per statement on 100,000 rows
whose terms each match thousands (``bench/provider_overhead.py``). The statistics only order
the rows a caller may see and are never returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.sql.expression import ColumnClause, ColumnElement

from esra.sql import BM25_B, BM25_K1, TextTarget, combine_pairwise, sql_number

__all__ = ["MAX_SCORED_TERMS", "Bm25Score", "bm25_score"]

Tsquery = Callable[[str], ColumnElement[Any]]

# ζ(2) = π²/6, the limit PostgreSQL's ts_rank divides a term's Σ 1/j² by.
_ZETA_2 = 1.6449340668

# The statistics row holds three columns per term (weight, tsquery, whether one lexeme) and
# the length slope, and PostgreSQL's target lists hold at most 1,664 entries (SQLSTATE 54011):
# the most terms one statement can score, stated as ``max_scored_terms``.
MAX_SCORED_TERMS = (1664 - 1) // 3
_STATISTICS_ALIAS = "esra_stats"
_RANKS_ALIAS = "esra_ranks"
_DOCUMENTS = "n"
_SLOPE = "length_slope"
_SATURATION = "saturation"


_ZERO = sql_number(0.0)
_HALF = sql_number(0.5)
_ONE = sql_number(1.0)
# Every occurrence counts the same, title or body, as in FTS5's bm25() and in BM25 over the
# whole record. ts_rank's default weights make one title word worth 2.5 body words, so a
# record that is only a title outranked the abstracts that discuss its subject.
_EVEN_WEIGHTS: ColumnElement[Any] = sa.literal_column("CAST('{1,1,1,1}' AS float4[])")


@attrs.frozen
class Bm25Score:
    """What a statement needs to score its rows: ``joined(base)`` as its FROM, ``score``.

    Attributes:
        statistics: the one-row derived table of the statement's weights and tsqueries.
        ranks: the per-row ``LATERAL`` subquery of length saturation and occurrences.
        score: the BM25 expression over both.
    """

    statistics: Any
    ranks: Any
    score: ColumnElement[Any]

    def joined(self, base: Any) -> Any:
        """``base`` joined with the statement's statistics row and each row's ranks."""
        return base.join(self.statistics, sa.true()).join(self.ranks, sa.true())


def bm25_score(target: TextTarget, tsquery: Tsquery, names: Sequence[str]) -> Bm25Score:
    """BM25 of every row of ``target`` for the terms bound as ``names`` (at least one).

    Per term, ``idf × tf × (k1 + 1) / (tf + K)`` is written ``w / (1 + K × (1 / tf))``: the
    weight ``w = idf × (k1 + 1)`` is the statement's, ``K`` the row's and ``1 / tf`` the row's
    and term's (NULL where the term does not occur), so each is computed once where it varies.
    """
    vector = sa.column(target.text_index or "", TSVECTOR, _selectable=target.base)
    statistics = _statistics(target, tsquery, names)
    ranks = _ranks(target.base, vector, statistics, names)
    score: ColumnElement[Any] | None = None
    for name in names:
        spread = _ONE + ranks.c[_SATURATION] * ranks.c[f"inverse_tf_{name}"]
        term = sa.func.coalesce(statistics.c[f"w_{name}"] / spread, _ZERO, type_=sa.Float)
        score = term if score is None else score + term
    assert score is not None  # called with at least one term
    return Bm25Score(statistics, ranks, score)


def _ranks(base: Any, vector: ColumnElement[Any], statistics: Any, names: Sequence[str]) -> Any:
    """Per row of ``base``, once: ``K = k1 × (1 − b + b × dl / avgdl)`` and each term's
    ``1 / tf``, read back from the term's unnormalised ``ts_rank`` (module docstring).

    ``ts_rank`` takes the term's tsquery as the statistics row made it: made here, each row
    would tokenize the term again (the configuration's cast is only stable, so PostgreSQL
    never folds it).
    """
    length = sa.cast(sa.func.length(vector), sa.Float)
    columns = [
        (sql_number(BM25_K1 * (1 - BM25_B)) + statistics.c[_SLOPE] * length).label(_SATURATION)
    ]
    for name in names:
        query = statistics.c[f"q_{name}"]
        rank = sa.cast(
            sa.func.ts_rank(_EVEN_WEIGHTS, vector, query, sa.literal_column("0")), sa.Float
        )
        # r = H(tf)/ζ(2) and tf ≈ r / (ζ(2)(1 − r)), so 1/tf ≈ ζ(2)(1/r − 1); a term of
        # several lexemes occurs once. NULL where the term does not occur (r = 0).
        inverse_tf = sa.case(
            (
                statistics.c[f"single_{name}"],
                sql_number(_ZETA_2) * (_ONE / sa.func.nullif(rank, _ZERO, type_=sa.Float) - _ONE),
            ),
            else_=_ONE / sa.func.nullif(sa.func.sign(rank), _ZERO, type_=sa.Float),
        )
        columns.append(inverse_tf.label(f"inverse_tf_{name}"))
    per_row = sa.select(*columns).correlate(base, statistics).offset(sa.literal_column("0"))
    return per_row.lateral(_RANKS_ALIAS)


def _statistics(target: TextTarget, tsquery: Tsquery, names: Sequence[str]) -> Any:
    """One row: each term's weight ``w = idf × (k1 + 1)``, the length slope ``k1 × b /
    avgdl``, and each term's tsquery with whether it is one lexeme — for the whole statement.
    """
    counts = _counts(target, tsquery, names)
    matched = sum((counts.c[f"df_{name}"] for name in names[1:]), counts.c[f"df_{names[0]}"])
    lengths = sum(
        (counts.c[f"lengths_{name}"] for name in names[1:]), counts.c[f"lengths_{names[0]}"]
    )
    average = lengths / sa.func.nullif(matched, _ZERO, type_=sa.Float)
    columns = [
        (sql_number(BM25_K1 * BM25_B) / sa.func.nullif(average, _ZERO, type_=sa.Float)).label(
            _SLOPE
        ),
        *((_idf(counts, name) * sql_number(BM25_K1 + 1)).label(f"w_{name}") for name in names),
        *(tsquery(name).label(f"q_{name}") for name in names),
        *(_one_lexeme(tsquery(name)).label(f"single_{name}") for name in names),
    ]
    fenced = sa.select(*columns).select_from(counts).offset(sa.literal_column("0"))
    return fenced.subquery(_STATISTICS_ALIAS)


def _idf(counts: Any, name: str) -> ColumnElement[Any]:
    df = counts.c[f"df_{name}"]
    # A kept row count may lag a growing table behind a term's exact count; never fewer
    # documents than match, or the idf's logarithm would be of a negative number.
    documents = sa.func.greatest(counts.c[_DOCUMENTS], df, type_=sa.Float)
    return sa.func.ln(_ONE + (documents - df + _HALF) / (df + _HALF), type_=sa.Float)


def _counts(target: TextTarget, tsquery: Tsquery, names: Sequence[str]) -> Any:
    """One row: the relation's row count ``n`` and, per term, how many rows the caller may
    see match it and their lengths summed (one indexed pass per term)."""
    relation: Any = target.base.element  # type: ignore[attr-defined]
    column = target.text_index or ""
    others = [c.name for c in relation.columns if c.name != column]

    def rows(label: str) -> Any:
        # A fresh alias per count, so each is its own uncorrelated subquery, with the columns
        # the caller's record conditions read.
        columns = (*(sa.column(name) for name in others), sa.column(column, TSVECTOR))
        return sa.table(relation.name, *columns, schema=relation.schema).alias(label)

    def matches(name: str) -> Any:
        matching = rows(f"esra_df_{name}")
        vector = matching.c[column]
        lengths = sa.func.coalesce(sa.func.sum(sa.func.length(vector)), _ZERO)
        counted = sa.select(
            sa.cast(sa.func.count(), sa.Float).label(f"df_{name}"),
            sa.cast(lengths, sa.Float).label(f"lengths_{name}"),
        ).select_from(matching)
        counted = counted.where(
            vector.op("@@", is_comparison=True)(tsquery(name)), *target.visible(matching.c)
        )
        return counted.subquery(f"esra_term_{name}")

    per_term = [matches(name) for name in names]
    counted_size = sa.select(sa.func.count()).select_from(rows(f"esra_{_DOCUMENTS}"))
    size = sa.func.coalesce(
        _planner_row_count(relation), sa.cast(counted_size.scalar_subquery(), sa.Float)
    )
    # Joined pairwise: a chain of some hundreds of joins is deeper than SQLAlchemy can walk
    # (``+`` chains it flattens itself).
    joined = combine_pairwise(per_term, lambda left, right: left.join(right, sa.true()))
    columns = [size.label(_DOCUMENTS), *(c for term in per_term for c in term.c)]
    # OFFSET 0 keeps the planner from pulling the derived table up into the outer query:
    # pulled up, every reference to ``n`` or a ``df`` became a scalar subquery of its own, so
    # the relation was counted once per scored term (three times for three terms, 9 ms each
    # on 100,000 rows). Fenced, each count runs exactly once per statement.
    fenced = sa.select(*columns).select_from(joined).offset(sa.literal_column("0"))
    return fenced.subquery("esra_counts")


def _one_lexeme(query: ColumnElement[Any]) -> ColumnElement[Any]:
    """Whether the term's tsquery is one lexeme (not a phrase of several)."""
    return sa.func.numnode(query) == sa.literal_column("1", sa.Integer)


def _planner_row_count(relation: Any) -> ColumnElement[Any]:
    """The relation's row count as PostgreSQL keeps it (``pg_class.reltuples``), or NULL.

    Counting the relation is a scan of every row on every search (9 ms per 100,000 rows, most
    of a search's cost, growing with the table), while ``N`` only enters the idf through
    ``ln``: BM25's idf is about ``ln(N + 1) - ln(df + 0.5)``, so a relative error ε in ``N``
    moves every term's idf by the same ε and barely reorders anything. The engines ESRA
    serves rank with such maintained statistics too (FTS5's, InnoDB's, SQL Server's). VACUUM
    and ANALYZE (and so autovacuum) keep ``reltuples``; it is exact for a table ANALYZE reads
    whole (under 30,000 rows at the default statistics target). It is -1 for a table never
    vacuumed or analysed: NULL then, and the caller counts.

    A view keeps no count, and counting one is a scan of what it reads — the document
    store's ``searchable_segments`` joins every segment to its document, 760 ms a search at
    1,000,000 segments. Its estimate is the largest count kept for a table, partitioned
    table or materialized view its definition reads (``pg_depend`` of its rewrite rule): the
    view's rows are about those rows, filtered or joined to smaller tables. A view over a
    view, or over tables never analysed, has none and is counted.

    It counts every row, also those a row-level security policy or the caller's record
    conditions hide; the ``df`` counts are the caller's own.
    """
    quoted = ".".join(
        '"' + str(part).replace('"', '""') + '"'
        for part in (relation.schema, relation.name)
        if part is not None
    )
    # A string literal of configuration (quotes doubled), so the binds stay the terms only.
    literal: ColumnElement[str] = sa.literal_column("'" + quoted.replace("'", "''") + "'")
    relation_oid = sa.func.to_regclass(literal)

    def pg_class(alias: str) -> Any:
        columns: tuple[ColumnClause[Any], ...] = (
            sa.column("oid"),
            sa.column("reltuples"),
            sa.column("relkind"),
        )
        return sa.table("pg_class", *columns, schema="pg_catalog").alias(alias)

    def kept(table: Any) -> ColumnElement[Any]:
        positive = sa.func.nullif(sa.func.greatest(table.c.reltuples, _ZERO), _ZERO)
        return sa.cast(positive, sa.Float)

    own = pg_class("esra_own")
    own_count = sa.select(kept(own)).where(own.c.oid == relation_oid).scalar_subquery()
    rule = sa.table("pg_rewrite", sa.column("oid"), sa.column("ev_class"), schema="pg_catalog")
    depend = sa.table(
        "pg_depend",
        sa.column("classid"),
        sa.column("objid"),
        sa.column("refobjid"),
        schema="pg_catalog",
    )
    read = pg_class("esra_read")
    counted_kinds: list[ColumnElement[Any]] = [
        sa.literal_column(f"'{kind}'") for kind in ("r", "p", "m")
    ]
    rules: ColumnElement[Any] = sa.literal_column("CAST('pg_catalog.pg_rewrite' AS regclass)")
    reads = rule.join(depend, sa.and_(depend.c.classid == rules, depend.c.objid == rule.c.oid))
    largest_read = (
        sa.select(sa.func.max(kept(read)))
        .select_from(reads.join(read, read.c.oid == depend.c.refobjid))
        .where(
            rule.c.ev_class == relation_oid,
            read.c.oid != relation_oid,
            read.c.relkind.in_(counted_kinds),
        )
        .scalar_subquery()
    )
    return sa.func.coalesce(own_count, largest_read)
