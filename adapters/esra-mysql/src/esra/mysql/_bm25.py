"""BM25 from InnoDB's full-text relevance, computed inside the search statement.

InnoDB scores a natural-language ``MATCH`` as ``Σ_w tf(w) × idf(w)²`` with ``idf(w) =
log10(N / df(w))`` (``N`` the documents of the FULLTEXT index): occurrences count linearly,
without saturation, and a row's length not at all, so a long record that repeats a word
outranks the short one about it. On the five test collections that ranked 0.471 nDCG@10
against BM25's 0.557 (CACM, whose records run from a bare title to a long abstract, 0.359
against 0.495). This module scores every row with BM25 itself, with the parameters of the
other engines (``esra.sql.BM25_K1``, ``esra.sql.BM25_B``)::

    score = Σ_t idf(t) × tf × (k1 + 1) / (tf + k1 × (1 − b + b × dl / avgdl))
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))

Each part comes from what InnoDB computes anyway:

- ``tf`` of a term of one indexed word — nearly every optional term, which the validator
  issues as words (``esra.core._pipeline.optional_words``) — is its relevance in the row
  divided by ``r1``, the smallest relevance it has in any row: one occurrence, ``idf²``. The
  quotient is rounded to three decimals: InnoDB keeps relevance in single precision, so the
  unrounded count is a whole number give or take a rounding that depends on the index-wide
  ``idf``, and two rows that tie for the caller were ordered by the words of rows it may not
  see.
- A term of several indexed words — a required term, a phrase, an optional term such as
  ``heat-transfer`` that InnoDB splits — is one ``MATCH`` whose relevance sums its words'
  occurrences weighed by each word's index-wide ``idf²``: no count can be read back from it
  that the words of hidden rows do not move. Its match counts as one occurrence, as
  PostgreSQL counts a phrase's (``esra.postgres._bm25``). A bound flag per term (``tb<i>w``,
  set from the server's token rules) says which of the two it is, so the statement's text
  stays the shape's.
- ``N`` is InnoDB's own document count, read back from one word's ``r1 = log10(N / df)²``
  as ``df × 10^√r1`` (``df`` here every row the word matches), rounded to a whole number for
  the same reason: no count of the table, and the ``N`` InnoDB's own idf uses. A one-word
  term is that word; a term of several words reads it from its first word, bound on its own
  (``tb<i>n``; empty, which matches nothing, for a one-word term). That count is the table's
  row estimate (``information_schema.TABLES.TABLE_ROWS``), sampled from
  ``STATS_SAMPLE_PAGES`` leaf pages when the statistics are recalculated: 3,204 CACM rows
  read 2,998 to 3,364 from one ``ANALYZE`` to the next, and every idf with it. A table
  whose ranking must not move with that sample sets ``STATS_SAMPLE_PAGES`` to at least its
  leaf pages (65,535 at most): the estimate is then the count, as ``bench/_ir_engines.py``
  does.
- ``dl`` is the row's length in bytes over the searchable columns, ``avgdl`` the average over
  the rows each term matches, summed in the pass that counts ``df``. BM25's pivot is the
  ratio of the two, so any measure proportional to the text's length serves; bytes cost
  nothing to read where counting characters decodes every row once per term (eight terms
  over CACM, scoring with lengths alone: 20 ms in characters, 8 in bytes). Text in a script
  of multi-byte characters counts longer than as many ASCII letters, which matters only
  between records of different scripts.

Per term, one aggregate over its ``MATCH`` (an indexed search of an alias of its own); all of
them in one derived row, read once per statement. Then one ``MATCH`` per term and row, and the
row's length only for the terms it contains.

The ``df`` of the idf and ``avgdl`` are counted in the same pass over the rows the caller may
see, those its record filters and record-filter template admit (``TextTarget.visible``):
counted over the whole relation, the words of rows hidden from the caller would reorder the
rows it sees (``docs/security.md``). A required term's or phrase's ``df`` counts the rows
that hold it as the statement's predicate does (its ``LIKE``), not every row holding one of
its words. ``N`` and ``r1`` stay the index's: ``r1`` is only the unit occurrences are read in
(rounded, the count keeps no trace of it) and ``N`` a volume, no row's words. The statistics
only order the rows a caller may see and are never returned.

Each term is one derived table of the statistics row's join, and MySQL and MariaDB join at
most 61 tables (``MAX_TABLES``; more is error 1116, "Too many tables"). So one statement scores
at most ``MAX_SCORED_TERMS`` terms: the provider states it (``ProviderCapabilities.
max_scored_terms``) and the validator refuses a query with more as ``TERM_LIMIT_EXCEEDED``,
before any statement is sent.

What it costs (``bench/retrieval_quality.py`` and a 100,000-row table in
``docs/benchmarks.md``): one more indexed pass per term, two to three and a half times the
statement's time where its terms match tens of thousands of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import sqlalchemy as sa
from sqlalchemy.sql.expression import ColumnElement

from esra.sql import BM25_B, BM25_K1, TextTarget, sql_number

__all__ = [
    "MAX_SCORED_TERMS",
    "Bm25Score",
    "ScoredTerm",
    "bm25_score",
    "counted_bind",
    "first_word_bind",
]

Match = Callable[[Sequence[ColumnElement[Any]], str], ColumnElement[Any]]
Contains = Callable[[Sequence[ColumnElement[Any]], str], ColumnElement[bool]]

# The tables MySQL and MariaDB join at most (``MAX_TABLES``); the statistics row joins one
# derived table per term.
MAX_SCORED_TERMS = 61
_STATISTICS_ALIAS = "esra_stats"
_ZERO = sql_number(0.0)
_HALF = sql_number(0.5)
_ONE = sql_number(1.0)
_TEN = sql_number(10.0)
_COUNTED: ColumnElement[Any] = sa.literal_column("1")
# Occurrences are read back to this many decimals: a one-word term's are a whole number up to
# the rounding of InnoDB's single-precision relevance, which carries its index-wide idf.
_TF_DECIMALS: ColumnElement[Any] = sa.literal_column("3")


def counted_bind(name: str) -> str:
    """The bind of the term bound as ``name`` that is 1 when its occurrences are counted (one
    indexed word) and 0 when a match is one occurrence (several)."""
    return f"{name}w"


def first_word_bind(name: str) -> str:
    """The bind of the term bound as ``name`` holding the one word ``N`` is read back from:
    its first indexed word when it has several, empty (matching nothing) when it has one."""
    return f"{name}n"


@attrs.frozen
class ScoredTerm:
    """One scored term: ``name`` binds its ``MATCH`` text; ``held_by``, for a required term
    or a phrase, binds the ``LIKE`` pattern of the rows that hold it (``None``: optional)."""

    name: str
    held_by: str | None = None


@attrs.frozen
class Bm25Score:
    """What a statement needs to score its rows: ``joined(base)`` as its FROM, ``score``."""

    statistics: Any
    score: ColumnElement[Any]

    def joined(self, base: Any) -> Any:
        """``base`` joined with the statement's one row of statistics."""
        return base.join(self.statistics, sa.true())


def bm25_score(
    target: TextTarget, match: Match, contains: Contains, terms: Sequence[ScoredTerm]
) -> Bm25Score:
    """BM25 of every row of ``target`` for ``terms`` (at least one).

    ``match(columns, name)`` is the natural-language ``MATCH`` of the text bound as ``name``
    over ``columns``; ``contains(columns, name)`` whether one of ``columns`` holds the
    ``LIKE`` pattern bound as ``name``. Per term, ``idf × tf × (k1 + 1) / (tf + K)`` with
    ``tf = relevance / r1`` (rounded; 1 for a term of several words) and ``K = k1 × (1 − b) +
    k1 × b × dl / avgdl`` is written ``w × tf / (tf + a + c × dl)``: ``w = idf × (k1 + 1)``,
    ``r1``, ``a = k1 × (1 − b)`` and ``c = k1 × b / avgdl`` are the statement's, computed
    once; the row's length is read only for the terms it contains.
    """
    statistics = _statistics(target, match, contains, terms)
    length = _length(target.searchable)
    score: ColumnElement[Any] | None = None
    for term in terms:
        name = term.name
        relevance = match(target.searchable, name)
        weight, unit, offset, slope = (
            statistics.c[f"{part}_{name}"] for part in ("w", "r1", "a", "c")
        )
        occurrences = sa.case(
            (_counted(name), sa.func.round(relevance / unit, _TF_DECIMALS)), else_=_ONE
        )
        scored = sa.case(
            (relevance > _ZERO, weight * occurrences / (occurrences + offset + slope * length)),
            else_=_ZERO,
        )
        score = scored if score is None else score + scored
    assert score is not None  # called with at least one term
    return Bm25Score(statistics, score)


def _counted(name: str) -> ColumnElement[bool]:
    """Whether the term bound as ``name`` is one indexed word, whose occurrences are counted."""
    return sa.bindparam(counted_bind(name), type_=sa.Integer) == _COUNTED


def _double(value: float) -> ColumnElement[Any]:
    """``value`` as a DOUBLE literal (scientific notation): ``0.9`` would be an exact DECIMAL,
    and MySQL divides DECIMALs to only ``div_precision_increment`` (4) more decimals."""
    return sa.literal_column(f"{value:.17e}", sa.Float)


def _length(columns: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
    """A row's length in bytes over ``columns`` (a NULL column counts as empty)."""
    lengths = [sa.func.coalesce(sa.func.length(column), _ZERO) for column in columns]
    return sum(lengths[1:], lengths[0])


def _read_back(every: ColumnElement[Any], unit: ColumnElement[Any]) -> ColumnElement[Any]:
    """InnoDB's document count from one word's ``every`` rows and smallest relevance
    ``log10(N / every)²`` (NULL when no row holds the word)."""
    return sa.func.round(every * sa.func.pow(_TEN, sa.func.sqrt(unit)))


def _counted_passes(
    target: TextTarget, match: Match, contains: Contains, terms: Sequence[ScoredTerm]
) -> list[Any]:
    """Per term, one aggregate over the rows its ``MATCH`` finds (an indexed search)."""
    relation: Any = target.base.element  # type: ignore[attr-defined]
    column_names = [column.name for column in target.searchable]

    def counted(term: ScoredTerm) -> Any:
        name = term.name
        # A fresh alias per term, so each is its own uncorrelated, indexed search, with every
        # column of the relation (the caller's record conditions read some).
        rows = relation.alias(f"esra_df_{name}")
        columns = [rows.c[c] for c in column_names]
        relevance = match(columns, name)
        word = match(columns, first_word_bind(name))
        length = _length(columns)
        admitted = list(target.visible(rows.c))
        if term.held_by is not None:
            # A row holds a term of several words as the statement's predicate says (its
            # LIKE), not by holding one of them; one word's MATCH already says it.
            admitted.append(sa.or_(_counted(name), contains(columns, term.held_by)))
        # InnoDB's N and r1 are the index's, hidden rows included: r1 is the unit ``tf`` is
        # read in (rounded, the count keeps no trace of it), and ``N`` is a volume. ``df``
        # and the lengths are counted over the rows the caller may see that hold the term,
        # so hidden rows' words never move its order (docs/security.md).
        seen: ColumnElement[Any] = sa.func.count()
        if admitted:
            holds = sa.and_(*admitted)
            seen = sa.func.sum(sa.case((holds, _COUNTED), else_=_ZERO))
            length = sa.case((holds, length), else_=_ZERO)
        # No CASTs: MySQL and MariaDB have no CAST to a floating type before 8.0.17 / 10.4,
        # and the arithmetic below is in DOUBLE anyway (MATCH's relevance is a float).
        return (
            sa.select(
                sa.func.count().label(f"all_{name}"),
                sa.func.coalesce(seen, _ZERO).label(f"df_{name}"),
                sa.func.min(relevance).label(f"r1_{name}"),
                sa.func.coalesce(sa.func.sum(length), _ZERO).label(f"lengths_{name}"),
                sa.func.coalesce(
                    sa.func.sum(sa.case((word > _ZERO, _COUNTED), else_=_ZERO)), _ZERO
                ).label(f"wall_{name}"),
                sa.func.min(sa.case((word > _ZERO, word))).label(f"wr1_{name}"),
            )
            .select_from(rows)
            .where(relevance > _ZERO)
            .subquery(f"esra_term_{name}")
        )

    return [counted(term) for term in terms]


def _statistics(
    target: TextTarget, match: Match, contains: Contains, terms: Sequence[ScoredTerm]
) -> Any:
    """One row, for the whole statement: per term ``w = idf × (k1 + 1)``, ``r1``, ``a = k1 × (1
    − b)`` and ``c = k1 × b / avgdl``.

    Read in two fenced steps: the per-term passes joined, with each term's read-back ``N``
    and the statement's (the largest; every term's that is read back is the same count); then
    the weights. A term of several words whose first word no row holds reads ``N`` from the
    statement's other terms, and from its own ``df`` when none has one: a floor that keeps
    its idf positive and counts no hidden row. A term no row contains has ``df`` 0 and no
    ``r1``: it scores no row, as none contains it.
    """
    names = [term.name for term in terms]
    per_term = _counted_passes(target, match, contains, terms)
    joined: Any = per_term[0]
    for each in per_term[1:]:
        joined = joined.join(each, sa.true())
    carried: list[ColumnElement[Any]] = []
    read_backs: list[ColumnElement[Any]] = []
    for name, part in zip(names, per_term, strict=True):
        counted = _counted(name)
        every = sa.case((counted, part.c[f"all_{name}"]), else_=part.c[f"wall_{name}"])
        unit = sa.case((counted, part.c[f"r1_{name}"]), else_=part.c[f"wr1_{name}"])
        read_back = _read_back(every, unit)
        read_backs.append(sa.func.coalesce(read_back, _ZERO))
        carried.append(read_back.label(f"n_{name}"))
        carried.append(every.label(f"every_{name}"))
        carried.extend(
            part.c[f"{column}_{name}"].label(f"{column}_{name}")
            for column in ("df", "r1", "lengths")
        )
    largest = read_backs[0] if len(read_backs) == 1 else sa.func.greatest(*read_backs)
    carried.append(largest.label("n_statement"))
    # LIMIT 1 (of one row) keeps MariaDB and MySQL from merging a derived table into the
    # query around it: merged, every row computed every term's idf and the average length
    # again (CACM, eight terms: 40 ms a statement instead of 12). Kept whole, it is one row
    # read once.
    counts = (
        sa.select(*carried).select_from(joined).limit(sa.literal_column("1")).subquery("esra_n")
    )
    matched = sum((counts.c[f"df_{n}"] for n in names[1:]), counts.c[f"df_{names[0]}"])
    lengths = sum((counts.c[f"lengths_{n}"] for n in names[1:]), counts.c[f"lengths_{names[0]}"])
    average = lengths / sa.func.nullif(matched, _ZERO)
    length_slope = _double(BM25_K1 * BM25_B) / sa.func.nullif(average, _ZERO)
    statement_n = sa.func.nullif(counts.c.n_statement, _ZERO)
    columns: list[ColumnElement[Any]] = []
    for name in names:
        df = counts.c[f"df_{name}"]
        known = sa.func.coalesce(counts.c[f"n_{name}"], statement_n, df)
        documents = sa.func.greatest(known, counts.c[f"every_{name}"])
        idf = sa.func.ln(_ONE + (documents - df + _HALF) / (df + _HALF))
        columns.append((idf * sql_number(BM25_K1 + 1)).label(f"w_{name}"))
        columns.append(counts.c[f"r1_{name}"].label(f"r1_{name}"))
        columns.append(_double(BM25_K1 * (1 - BM25_B)).label(f"a_{name}"))
        columns.append(length_slope.label(f"c_{name}"))
    fenced = sa.select(*columns).select_from(counts).limit(sa.literal_column("1"))
    return fenced.subquery(_STATISTICS_ALIAS)
