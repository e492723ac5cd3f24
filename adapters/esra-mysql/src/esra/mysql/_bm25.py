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

- ``tf`` is the term's relevance in the row divided by ``r1``, the smallest relevance it has
  in any row: one occurrence, ``idf²``. A term of one word — every optional term, which
  the validator issues as words (``esra.core._pipeline.optional_words``) — is counted
  exactly; a term of several words (a required one, a phrase) sums their relevances, so its
  count weighs each word by its ``idf²`` relative to the commonest of them. The quotient is
  rounded to three decimals: InnoDB keeps relevance in single precision, so a one-word
  term's unrounded count is a whole number give or take a rounding that depends on the
  index-wide ``idf``, and two rows that tie for the caller were ordered by the words of rows
  it may not see.
- ``N`` is InnoDB's own document count, read back from ``r1 = log10(N / df)²`` as ``df ×
  10^√r1`` (``df`` here every row the term matches), rounded to a whole number for the same
  reason: no count of the table, and the ``N`` InnoDB's own idf uses.
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
rows it sees (``docs/security.md``). ``N`` and ``r1`` stay the index's: ``r1`` is only the
unit occurrences are read in (rounded, the count keeps no trace of it) and ``N`` a volume, no
row's words. The statistics only order the rows a caller may see and are never returned.

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

__all__ = ["MAX_SCORED_TERMS", "Bm25Score", "bm25_score"]

Match = Callable[[Sequence[ColumnElement[Any]], str], ColumnElement[Any]]

# The tables MySQL and MariaDB join at most (``MAX_TABLES``); the statistics row joins one
# derived table per term.
MAX_SCORED_TERMS = 61
_STATISTICS_ALIAS = "esra_stats"
_ZERO = sql_number(0.0)
_HALF = sql_number(0.5)
_ONE = sql_number(1.0)
_TEN = sql_number(10.0)
# Occurrences are read back to this many decimals: a one-word term's are a whole number up to
# the rounding of InnoDB's single-precision relevance, which carries its index-wide idf.
_TF_DECIMALS: ColumnElement[Any] = sa.literal_column("3")


@attrs.frozen
class Bm25Score:
    """What a statement needs to score its rows: ``joined(base)`` as its FROM, ``score``."""

    statistics: Any
    score: ColumnElement[Any]

    def joined(self, base: Any) -> Any:
        """``base`` joined with the statement's one row of statistics."""
        return base.join(self.statistics, sa.true())


def bm25_score(target: TextTarget, match: Match, names: Sequence[str]) -> Bm25Score:
    """BM25 of every row of ``target`` for the terms bound as ``names`` (at least one).

    ``match(columns, name)`` is the natural-language ``MATCH`` of the term bound as
    ``name`` over ``columns``. Per term, ``idf × tf × (k1 + 1) / (tf + K)`` with ``tf =
    relevance / r1`` (rounded) and ``K = k1 × (1 − b) + k1 × b × dl / avgdl`` is written ``w ×
    tf / (tf + a + c × dl)``: ``w = idf × (k1 + 1)``, ``r1``, ``a = k1 × (1 − b)`` and ``c =
    k1 × b / avgdl`` are the statement's, computed once; the row's length is read only for
    the terms it contains.
    """
    statistics = _statistics(target, match, names)
    length = _length(target.searchable)
    score: ColumnElement[Any] | None = None
    for name in names:
        relevance = match(target.searchable, name)
        weight, unit, offset, slope = (
            statistics.c[f"{part}_{name}"] for part in ("w", "r1", "a", "c")
        )
        occurrences = sa.func.round(relevance / unit, _TF_DECIMALS)
        term = sa.case(
            (relevance > _ZERO, weight * occurrences / (occurrences + offset + slope * length)),
            else_=_ZERO,
        )
        score = term if score is None else score + term
    assert score is not None  # called with at least one term
    return Bm25Score(statistics, score)


def _double(value: float) -> ColumnElement[Any]:
    """``value`` as a DOUBLE literal (scientific notation): ``0.9`` would be an exact DECIMAL,
    and MySQL divides DECIMALs to only ``div_precision_increment`` (4) more decimals."""
    return sa.literal_column(f"{value:.17e}", sa.Float)


def _length(columns: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
    """A row's length in bytes over ``columns`` (a NULL column counts as empty)."""
    lengths = [sa.func.coalesce(sa.func.length(column), _ZERO) for column in columns]
    return sum(lengths[1:], lengths[0])


def _statistics(target: TextTarget, match: Match, names: Sequence[str]) -> Any:
    """One row, for the whole statement: per term ``w = idf × (k1 + 1)``, ``r1``, ``a = k1 × (1
    − b)`` and ``c = k1 × b / avgdl``.

    A term no row contains has ``df`` 0 and no ``r1``: its columns are NULL, and it scores no
    row, as none contains it.
    """
    relation: Any = target.base.element  # type: ignore[attr-defined]
    column_names = [column.name for column in target.searchable]

    def counted(name: str) -> Any:
        # A fresh alias per term, so each is its own uncorrelated, indexed search, with every
        # column of the relation (the caller's record conditions read some).
        rows = relation.alias(f"esra_df_{name}")
        columns = [rows.c[c] for c in column_names]
        relevance = match(columns, name)
        length = _length(columns)
        visible = list(target.visible(rows.c))
        # InnoDB's N and r1 are the index's, hidden rows included: r1 is the unit ``tf`` is
        # read in (rounded, the count keeps no trace of it), and ``N`` is a volume. ``df``
        # and the lengths are counted over the rows the caller may see, so hidden rows'
        # words never move its order (docs/security.md).
        seen: ColumnElement[Any] = sa.func.count()
        if visible:
            admitted = sa.and_(*visible)
            seen = sa.func.sum(sa.case((admitted, sa.literal_column("1")), else_=_ZERO))
            length = sa.case((admitted, length), else_=_ZERO)
        # No CASTs: MySQL and MariaDB have no CAST to a floating type before 8.0.17 / 10.4,
        # and the arithmetic below is in DOUBLE anyway (MATCH's relevance is a float).
        return (
            sa.select(
                sa.func.count().label(f"all_{name}"),
                sa.func.coalesce(seen, _ZERO).label(f"df_{name}"),
                sa.func.min(relevance).label(f"r1_{name}"),
                sa.func.coalesce(sa.func.sum(length), _ZERO).label(f"lengths_{name}"),
            )
            .select_from(rows)
            .where(relevance > _ZERO)
            .subquery(f"esra_term_{name}")
        )

    per_term = [counted(name) for name in names]
    joined: Any = per_term[0]
    for each in per_term[1:]:
        joined = joined.join(each, sa.true())
    matched = sum(
        (t.c[f"df_{n}"] for t, n in zip(per_term[1:], names[1:], strict=True)),
        per_term[0].c[f"df_{names[0]}"],
    )
    lengths = sum(
        (t.c[f"lengths_{n}"] for t, n in zip(per_term[1:], names[1:], strict=True)),
        per_term[0].c[f"lengths_{names[0]}"],
    )
    average = lengths / sa.func.nullif(matched, _ZERO)
    length_slope = _double(BM25_K1 * BM25_B) / sa.func.nullif(average, _ZERO)
    columns: list[ColumnElement[Any]] = []
    for term, name in zip(per_term, names, strict=True):
        df, every = term.c[f"df_{name}"], term.c[f"all_{name}"]
        r1 = term.c[f"r1_{name}"]
        read_back = sa.func.round(every * sa.func.pow(_TEN, sa.func.sqrt(r1)))
        documents = sa.func.greatest(read_back, every)
        idf = sa.func.ln(_ONE + (documents - df + _HALF) / (df + _HALF))
        columns.append((idf * sql_number(BM25_K1 + 1)).label(f"w_{name}"))
        columns.append(r1.label(f"r1_{name}"))
        columns.append(_double(BM25_K1 * (1 - BM25_B)).label(f"a_{name}"))
        columns.append(length_slope.label(f"c_{name}"))
    # LIMIT 1 (of one row) keeps MariaDB and MySQL from merging the derived table into the
    # outer query: merged, every row computed every term's idf and the average length again
    # (CACM, eight terms: 40 ms a statement instead of 12). Kept whole, it is one row read
    # once.
    fenced = sa.select(*columns).select_from(joined).limit(sa.literal_column("1"))
    return fenced.subquery(_STATISTICS_ALIAS)
