"""SQLite FTS5 as a ``FullTextDialect``: one bound MATCH string built from quoted terms only.

FTS5's query language treats ``AND OR NOT NEAR ( ) * ^ : + -`` and bare words specially, so
user text is never given to it unquoted: every term and phrase becomes an FTS5 string —
wrapped in ``"`` with any ``"`` inside doubled — and the operators between those strings come
from this module alone. The whole expression travels as ONE bind parameter (``q``), so the
command text never changes with the content, and the content can only ever be a literal.

Semantics (over the FTS table named by ``Mapping.text_index``, external content, joined to
the base relation on ``rowid``):

- required terms and phrases are ANDed;
- optional terms are ORed; with required terms present they only raise the score
  (``must AND (first_must OR optional...)``), without them at least one must match;
- excluded terms are removed with ``NOT``; a query with excluded terms only keeps every row
  whose rowid is not among the excluded terms' matches;
- the score is ``-bm25(fts)``, so higher is better — with the statistics of the rows the
  caller may see when its query carries record conditions (below).

FTS5's ``bm25()`` weighs each term by an idf counted over the whole index, so the words of
rows a caller may not see — another tenant's documents in one store file, its own documents
of a scope it lacks — would reorder the rows it sees (``docs/security.md``). A query with
record filters or a record-filter template is therefore scored term by term: each positive
term's own ``bm25()`` (a ``MATCH`` of that term alone, bound as ``q0``, ``q1``, ..., over
the rows the caller may see) is
``idf × sat``, where ``sat`` is the term's saturated, length-normalised frequency in the row;
dividing out the index's idf and multiplying by the idf of the rows the caller may see
(``df`` counted with the same record conditions) gives BM25 with the caller's ``df``::

    score = Σ_t −bm25_t(row) × idf(N, df_caller(t)) / idf(N, df_index(t))

with FTS5's own idf, ``max(ln((N − df + 0.5) / (df + 0.5)), 1e-6)``, and ``N`` the index's
row count (its ``_docsize`` table: one row per indexed row). Where the caller may see every
row the ratio is 1 and the score is ``-bm25()``'s to rounding — except beside required terms,
where the MATCH expression repeats the first required term (``must AND (first_must OR
optional...)``) and ``bm25()`` of it counts that term twice; scored term by term, each counts
once. ``N`` and the average length inside ``sat`` stay the index's: volumes, no row's words
— as on PostgreSQL and MySQL.
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa

from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget

__all__ = [
    "IDF_FUNCTION",
    "MATCH_BIND",
    "MAX_SCORED_TERMS",
    "Fts5FullText",
    "fts5_idf",
    "fts5_match_expression",
    "fts5_string",
    "term_bind_name",
]

MATCH_BIND = "q"
# A caller-scored statement joins the relation, the FTS table, its statistics row and one
# match per term, and SQLite joins at most 64 tables ("at most 64 tables in a join"): the
# most terms one statement can score, stated as ``max_scored_terms`` for every caller alike,
# so what a plan may hold does not depend on who asks.
MAX_SCORED_TERMS = 64 - 3
# The name the read-only connections give ``fts5_idf`` in SQL: SQLite's own ``ln`` is
# compiled in only where SQLITE_ENABLE_MATH_FUNCTIONS was (not on Windows, not everywhere).
IDF_FUNCTION = "esra_fts5_idf"


def fts5_idf(rows: float | None, matching: float | None) -> float | None:
    """FTS5's ``bm25()`` idf of a term ``matching`` of ``rows`` rows (``fts5_aux.c``):
    ``ln((N − df + 0.5) / (df + 0.5))``, never below 1e-6. NULL for a NULL count."""
    if rows is None or matching is None:
        return None
    ratio = (rows - matching + 0.5) / (matching + 0.5)
    return math.log(ratio) if ratio > 1.0 else 1e-6


def term_bind_name(index: int) -> str:
    """The bind carrying positive term ``index`` alone (required, phrases, then optional)."""
    return f"{MATCH_BIND}{index}"


def fts5_string(term: str) -> str:
    """Return ``term`` as an FTS5 string literal: a phrase of its tokens, never an operator.

    NUL ends an FTS5 query string early, and it can never be part of a token, so it becomes a
    space (a token separator) rather than a syntax error.
    """
    return '"' + term.replace("\x00", " ").replace('"', '""') + '"'


def _group(parts: list[str], operator: str) -> str:
    joined = f" {operator} ".join(parts)
    return f"({joined})" if len(parts) > 1 else joined


def fts5_match_expression(terms: SearchTerms) -> str:
    """Return the FTS5 MATCH expression for ``terms`` (empty when there are no terms).

    With positive terms the expression selects the matching rows; with excluded terms only it
    selects the rows to exclude (the clause negates it with ``NOT IN``).
    """
    must = [fts5_string(t) for t in (*terms.required, *terms.phrases)]
    may = [fts5_string(t) for t in terms.optional]
    excluded = [fts5_string(t) for t in terms.excluded]
    if must and may:
        positive = f"{_group(must, 'AND')} AND {_group([must[0], *may], 'OR')}"
    elif must:
        positive = _group(must, "AND")
    elif may:
        positive = _group(may, "OR")
    else:
        return " OR ".join(excluded)
    if excluded:
        return f"({positive}) NOT {_group(excluded, 'OR')}"
    return positive


class Fts5FullText:
    """The FTS5 strategy for ``esra.sql.StatementBuilder``.

    The FTS table must be an external-content FTS5 table over the mapping's relation with
    ``content_rowid`` equal to the relation's ``rowid`` (``esra.sqlite.create_fts5_index``
    creates one). A mapping without ``text_index`` can only run term-less (RECENT) queries.
    """

    name = "sqlite-fts5"
    base_columns: tuple[str, ...] = ("rowid",)

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """Join the FTS table and match ``:q`` against it; score with ``-bm25``."""
        base: Any = target.base
        no_score = sa.literal_column("0.0", sa.Float)
        if not shape.positive and not shape.excluded:
            return FullTextClause(from_clause=base, predicate=None, score=no_score)
        index = target.text_index or ""
        fts = _fts_table(target)
        match = fts.c[index].op("MATCH")(sa.bindparam(MATCH_BIND))
        if not shape.positive:
            excluded = sa.select(fts.c.rowid).where(match)
            predicate = base.c.rowid.not_in(excluded.scalar_subquery())
            return FullTextClause(from_clause=base, predicate=predicate, score=no_score)
        joined = base.join(fts, fts.c.rowid == base.c.rowid)
        if not list(target.visible(target.base.c)):
            return FullTextClause(
                from_clause=joined, predicate=match, score=-sa.func.bm25(fts.c[index])
            )
        return _caller_scored(target, joined, match, shape.positive)

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return ``{"q": <match expression>}`` and each positive term alone as ``q0``,
        ``q1``, ... (read only by a statement with record conditions), or nothing for a
        term-less query."""
        expression = fts5_match_expression(terms)
        if not expression:
            return {}
        values: dict[str, object] = {MATCH_BIND: expression}
        positive = (*terms.required, *terms.phrases, *terms.optional)
        for i, term in enumerate(positive):
            values[term_bind_name(i)] = fts5_string(term)
        return values


def _fts_table(target: TextTarget) -> Any:
    """A new reference to the FTS table, by its configured name: the FTS5 hidden column
    carrying the table's name is the MATCH operand, and it cannot be reached through an
    alias."""
    index = target.text_index or ""
    return sa.table(index, sa.column(index), sa.column("rowid"), schema=target.schema)


def _term_match(fts: Any, target: TextTarget, term: int) -> Any:
    return fts.c[target.text_index or ""].op("MATCH")(sa.bindparam(term_bind_name(term)))


def _caller_scored(target: TextTarget, joined: Any, match: Any, terms: int) -> FullTextClause:
    """The statement's FROM and score for a query with record conditions (module doc).

    Per term, one common table expression holds the term's matches the caller may see with
    their own ``bm25()``: counted, it is the caller's ``df``; joined by rowid, each row's
    score. SQLite materialises it once for both (one pass of the term's matches joined to
    the relation, instead of one to count and one over every match to score).
    """
    relation: Any = target.base.element  # type: ignore[attr-defined]
    index = target.text_index or ""
    docsize = sa.table(f"{index}_docsize", schema=target.schema)
    rows = sa.select(sa.func.count()).select_from(docsize).scalar_subquery()
    idf = getattr(sa.func, IDF_FUNCTION)
    weights, matches = [], []
    for term in range(terms):
        seen, admitted = _fts_table(target), relation.alias(f"esra_v{term}")
        visible = (
            sa.select(seen.c.rowid.label("r"), sa.func.bm25(seen.c[index]).label("s"))
            .select_from(seen.join(admitted, admitted.c.rowid == seen.c.rowid))
            .where(_term_match(seen, target, term), *target.visible(admitted.c))
            .cte(f"esra_t{term}")
        )
        everywhere = _fts_table(target)
        in_index = sa.select(sa.func.count()).select_from(everywhere)
        in_index = in_index.where(_term_match(everywhere, target, term))
        for_caller = sa.select(sa.func.count()).select_from(visible)
        ratio = idf(rows, for_caller.scalar_subquery(), type_=sa.Float) / idf(
            rows, in_index.scalar_subquery(), type_=sa.Float
        )
        weights.append(ratio.label(f"w{term}"))
        matches.append(visible)
    # One row of weights, computed once per statement; LIMIT keeps SQLite from flattening it
    # into the outer query and counting again for every row.
    statistics = sa.select(*weights).limit(sa.literal_column("1")).subquery("esra_stats")
    scored = joined.join(statistics, sa.true())
    score: Any = None
    for term, visible in enumerate(matches):
        scored = scored.outerjoin(visible, visible.c.r == target.base.c.rowid)
        part = -sa.func.coalesce(visible.c.s, sa.literal_column("0.0")) * statistics.c[f"w{term}"]
        score = part if score is None else score + part
    return FullTextClause(from_clause=scored, predicate=match, score=score)
