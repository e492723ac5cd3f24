"""Oracle Text as a ``FullTextDialect``: ``CONTAINS(col, :q, 1) > 0``, every token escaped.

Oracle Text reads ``AND OR NOT NEAR ABOUT ACCUM MINUS WITHIN ...`` and
``, & = ? { } \\ ( ) [ ] - ; ~ | $ ! > * % _`` as operators, so user text is never given to it
raw. Each term is split on whitespace (NUL and backslash count as whitespace) and every
token becomes ``{token}`` (braces escape everything inside; a ``}`` in the token is doubled);
tokens of one term side by side form a phrase. The operators between terms come from this
module alone, and the whole expression travels as ONE bind parameter (``q``), so the command
text never changes with the content.

Semantics over the mapping's CONTEXT index (on its first searchable column, typically with a
``MULTI_COLUMN_DATASTORE`` covering every searchable column):

- required terms and phrases are ANDed;
- optional terms are combined with ``ACCUM`` (any may match; more matches score higher);
  beside required terms they only raise the score (``must AND (first_must ACCUM optional)``);
- excluded terms are removed with ``NOT``; with excluded terms only, the rows matching them
  are removed by ``NOT EXISTS``;
- the score is ``SCORE(1)``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget

__all__ = ["MATCH_BIND", "OracleTextFullText", "oracle_text_expression", "oracle_text_term"]

MATCH_BIND = "q"
_LABEL: Any = sa.literal_column("1")


def _escape(token: str) -> str:
    return "{" + token.replace("}", "}}") + "}"


def _separated(term: str) -> str:
    # NUL is never part of a word. Nor is a backslash to the default lexer (a character
    # that is no letter, digit, printjoin or skipjoin separates words), and Oracle Text's
    # reference leaves open whether one inside braces escapes the next character: there, a
    # token ending in ``\`` would hide its closing brace and let the rest of the term out of
    # the escape as operators. As a separator it can do neither.
    return term.replace("\x00", " ").replace("\\", " ")


def oracle_text_term(term: str) -> str:
    """Return ``term`` as escaped tokens (``{a} {b}``: a phrase), never an operator.

    NUL and backslash separate tokens like whitespace. A term without tokens stays one
    escaped token (``{ }``), which matches nothing rather than vanishing from the expression.
    """
    separated = _separated(term)
    tokens = separated.split()
    if not tokens:
        return _escape(separated)
    return " ".join(_escape(token) for token in tokens)


def _group(parts: list[str], operator: str) -> str:
    wrapped = [f"({part})" for part in parts]
    return f" {operator} ".join(wrapped)


def oracle_text_expression(terms: SearchTerms) -> str:
    """Return the CONTAINS expression for ``terms`` (empty when there are no terms).

    With positive terms it selects the matching rows; with excluded terms only it selects
    the rows to remove (the clause negates it with ``NOT EXISTS``).
    """
    must = [oracle_text_term(t) for t in (*terms.required, *terms.phrases)]
    may = [oracle_text_term(t) for t in terms.optional]
    excluded = [oracle_text_term(t) for t in terms.excluded]
    if must and may:
        positive = f"({_group(must, 'AND')}) AND ({_group([must[0], *may], 'ACCUM')})"
    elif must:
        positive = _group(must, "AND")
    elif may:
        positive = _group(may, "ACCUM")
    else:
        return _group(excluded, "OR")
    if excluded:
        return f"({positive}) NOT ({_group(excluded, 'OR')})"
    return positive


class OracleTextFullText:
    """The Oracle Text strategy for ``esra.sql.StatementBuilder`` (use the ``oracle`` dialect).

    The mapping's first searchable column must carry a CONTEXT index
    (``esra.oracle.text_index_statements`` writes the DDL).
    """

    name = "oracle-text"
    base_columns: tuple[str, ...] = ()

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """``CONTAINS(col, :q, 1) > 0`` scored by ``SCORE(1)``; NOT EXISTS for exclusions only."""
        base: Any = target.base
        zero = sa.literal_column("0", sa.Integer)
        # A bare 0 in ORDER BY would be read as a select-list position (ORA-01785).
        no_score = sa.cast(zero, sa.Integer)
        if not shape.positive and not shape.excluded:
            return FullTextClause(from_clause=base, predicate=None, score=no_score)
        column = target.searchable[0]
        if not shape.positive:
            names = (target.key.name, column.name)
            other: Any = sa.table(
                base.element.name, *(sa.column(n) for n in names), schema=target.schema
            ).alias("x")
            contains = sa.func.CONTAINS(other.c[column.name], sa.bindparam(MATCH_BIND))
            hit: Any = sa.select(sa.literal_column("1")).select_from(other)
            hit = hit.where(other.c[target.key.name] == target.key, contains > zero)
            return FullTextClause(from_clause=base, predicate=~sa.exists(hit), score=no_score)
        contains = sa.func.CONTAINS(column, sa.bindparam(MATCH_BIND), _LABEL)
        return FullTextClause(
            from_clause=base, predicate=contains > zero, score=sa.func.SCORE(_LABEL)
        )

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return ``{"q": <expression>}``, or nothing for a term-less query."""
        expression = oracle_text_expression(terms)
        return {MATCH_BIND: expression} if expression else {}
