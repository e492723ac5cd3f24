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
- the score is ``-bm25(fts)``, so higher is better.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget

__all__ = ["MATCH_BIND", "Fts5FullText", "fts5_match_expression", "fts5_string"]

MATCH_BIND = "q"


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
        # The FTS5 hidden column carrying the table's name is the MATCH operand; it cannot be
        # reached through an alias, so the FTS table is referenced by its configured name.
        fts: Any = sa.table(index, sa.column(index), sa.column("rowid"), schema=target.schema)
        match = fts.c[index].op("MATCH")(sa.bindparam(MATCH_BIND))
        if not shape.positive:
            excluded = sa.select(fts.c.rowid).where(match)
            predicate = base.c.rowid.not_in(excluded.scalar_subquery())
            return FullTextClause(from_clause=base, predicate=predicate, score=no_score)
        return FullTextClause(
            from_clause=base.join(fts, fts.c.rowid == base.c.rowid),
            predicate=match,
            score=-sa.func.bm25(fts.c[index]),
        )

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return ``{"q": <match expression>}``, or nothing for a term-less query."""
        expression = fts5_match_expression(terms)
        return {MATCH_BIND: expression} if expression else {}
