"""The per-engine full-text strategy: how one engine turns search terms into SQL.

Every SQL provider shares one statement builder (``esra.sql._builder``); only the full-text
part differs per engine (FTS5 ``MATCH``, ``@@ plainto_tsquery``, ``MATCH ... AGAINST``,
``CONTAINSTABLE``, Oracle Text ``CONTAINS``). A ``FullTextDialect`` supplies that part in two
deliberately separate steps:

1. ``clause(target, shape)`` builds the predicate and the score expression from the *shape*
   alone (how many terms of each kind), with bind parameters that carry no value. It never
   sees a term, so no term can reach the command text — by construction, not by care.
2. ``bind_values(terms)`` returns the values for those bind parameters, per execution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs
import sqlalchemy as sa
from sqlalchemy.sql.expression import ColumnElement, FromClause

__all__ = [
    "BM25_B",
    "BM25_K1",
    "FullTextClause",
    "FullTextDialect",
    "RowConditions",
    "SearchTerms",
    "TermShape",
    "TextTarget",
    "combine_pairwise",
    "sql_number",
]

_Part = TypeVar("_Part")

# BM25's parameters wherever an engine's statement computes it (PostgreSQL, MySQL/MariaDB):
# FTS5's bm25() defaults, which the LocalModel's rerank uses too, so every engine ranks with
# the same saturation and length pivot. Chosen for every engine alike, from no collection.
BM25_K1 = 1.2
BM25_B = 0.75


def sql_number(value: float) -> ColumnElement[Any]:
    """``value`` as SQL text, not a bind parameter: a dialect's binds are the terms only."""
    return sa.literal_column(repr(round(value, 10)), sa.Float)


def combine_pairwise(parts: Sequence[_Part], combine: Callable[[_Part, _Part], _Part]) -> _Part:
    """``parts`` (at least one) combined by an associative ``combine`` — a custom operator,
    a join — pairwise: a tree of depth ``log2(n)``.

    Combined left to right, a query's terms made a chain as deep as they are many, and
    SQLAlchemy walks an expression or a join recursively: some hundreds of terms exhausted
    Python's recursion limit, and the query failed as ``UNKNOWN``. (It flattens chains of
    ``+``, ``AND`` and ``OR`` itself; not those of ``op()`` or of joins.)
    """
    if not parts:
        msg = "nothing to combine"
        raise ValueError(msg)
    level = list(parts)
    while len(level) > 1:
        paired = [
            combine(left, right) for left, right in zip(level[::2], level[1::2], strict=False)
        ]
        level = paired + level[len(paired) * 2 :]
    return level[0]


@attrs.frozen
class TermShape:
    """How many terms of each kind a query carries: all a ``clause`` may depend on."""

    required: int = 0
    optional: int = 0
    excluded: int = 0
    phrases: int = 0

    @property
    def positive(self) -> int:
        """The number of terms and phrases a row must (or may) match."""
        return self.required + self.optional + self.phrases


@attrs.frozen
class SearchTerms:
    """The literal search content of one query; only ever sent as bind values."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()

    @property
    def shape(self) -> TermShape:
        """The counts that determine the command text."""
        return TermShape(
            required=len(self.required),
            optional=len(self.optional),
            excluded=len(self.excluded),
            phrases=len(self.phrases),
        )


# Conditions over a column collection (``alias.c``) of any alias of the searched relation.
RowConditions = Callable[[Any], Sequence[ColumnElement[bool]]]


def _no_conditions(_columns: Any) -> Sequence[ColumnElement[bool]]:
    return ()


@attrs.frozen(eq=False)
class TextTarget:
    """The relation being searched, as SQLAlchemy objects built from configuration only.

    Attributes:
        base: the mapping's relation (aliased), carrying every configured column plus the
            dialect's ``base_columns``.
        key: the record-key column of ``base``.
        searchable: the columns the mapping marks searchable (title and content fields when
            none is marked), in configuration order.
        text_index: the configured text-index name (an FTS table, a tsvector column, a
            full-text catalog...) or ``None``.
        schema: the schema the statement names the relation in, if any.
        visible: the conditions the query's record filters and record predicate put on a
            row, written over the columns of whatever alias of ``base`` it is given (bound
            under the same names as in the statement's WHERE): the rows the caller may see.
            A dialect that counts collection statistics in the statement counts them over
            these rows only, so rows hidden from the caller — another tenant's, another
            security scope's — never move the order of the rows it sees. It gives no
            condition for a query without record conditions.
    """

    base: FromClause
    key: ColumnElement[Any]
    searchable: tuple[ColumnElement[Any], ...]
    text_index: str | None
    schema: str | None
    visible: RowConditions = _no_conditions


@attrs.frozen(eq=False)
class FullTextClause:
    """What a dialect contributes to the statement.

    Attributes:
        from_clause: what to select from — ``target.base`` or a join of it with a text index.
        predicate: the match condition, or ``None`` when the query has no terms.
        score: the relevance expression; higher is better.
    """

    from_clause: FromClause
    predicate: ColumnElement[bool] | None
    score: ColumnElement[Any]


@runtime_checkable
class FullTextDialect(Protocol):
    """**Protocol:** one engine's safe full-text form (user text is only ever a literal).

    Bind parameter names a dialect creates must start with ``t`` or ``q`` and be
    deterministic for a shape; the builder owns ``f*``, ``r*`` and ``lim``.
    """

    @property
    def name(self) -> str:
        """A stable identifier for the compiled-statement cache key."""
        ...

    @property
    def base_columns(self) -> tuple[str, ...]:
        """Extra physical columns of the base relation the clause needs (SQLite: ``rowid``)."""
        ...

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """Return the from-clause, predicate and score for a query of ``shape``.

        Must depend on ``target`` and ``shape`` only, so equal shapes give equal text.
        """
        ...

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return the value of every bind parameter ``clause`` created for ``terms.shape``."""
        ...
