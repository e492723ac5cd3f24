"""PostgreSQL ``tsvector`` full text as a ``FullTextDialect``: one bound tsquery per term.

User text never meets the tsquery *syntax*: every term and phrase is its own bind parameter
passed to ``phraseto_tsquery(CAST(:qcfg AS regconfig), :tN)``, which only tokenizes text (no
``&``, ``|``, ``!``, ``<->``, ``:*`` or quotes are ever interpreted), and the configuration
name is bound too. The operators combining those queries come from this module alone:

- required terms and phrases are ANDed (``&&``): a row must match every one;
- optional terms are ORed (``||``); beside required terms they only raise the score, alone at
  least one must match;
- excluded terms are removed with ``!!`` (``vector @@ (positive && !!(x0 || x1))``, one
  indexable match); with excluded terms only, ``NOT (vector @@ (x0 || x1))``;
- the score is BM25 over the required terms, phrases and optional terms, computed in the
  statement from ``ts_rank``, the vector's length and counts PostgreSQL makes in the same
  statement (``esra.postgres._bm25``), as every other engine ESRA serves ranks by BM25 or
  something close to it (FTS5's ``bm25()``, InnoDB's relevance, SQL Server's and Oracle's
  ranks).

Why ``phraseto_tsquery`` for terms as well as phrases: a term is matched as the sequence of
its own tokens — ``alpha AND beta`` finds that text, not every row holding the three words —
exactly as the SQLite reference's quoted FTS5 strings do. For a one-word term it is the same
query ``plainto_tsquery`` would give. ``to_tsquery`` and ``websearch_to_tsquery`` are never
used: both let the text supply operators. A term made only of stop words or punctuation
tokenizes to an empty query, which PostgreSQL drops from ``&&``/``||`` (and matches nothing
alone): such a term is inert, never a syntax error.

The vector is the mapping's ``text_index``: a stored generated ``tsvector`` column of the
relation with a GIN index (``esra.postgres.create_text_index`` makes one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import REGCONFIG, TSQUERY, TSVECTOR
from sqlalchemy.sql.expression import ColumnElement

from esra.postgres._bm25 import bm25_score
from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget, combine_pairwise

__all__ = ["CONFIG_BIND", "DEFAULT_TEXT_SEARCH_CONFIG", "TsvectorFullText", "term_bind_names"]

DEFAULT_TEXT_SEARCH_CONFIG = "english"
CONFIG_BIND = "qcfg"

# One prefix per kind of term; every name starts with "t" as the builder requires.
_PREFIXES = {"required": "tr", "optional": "to", "phrases": "tp", "excluded": "tx"}


def term_bind_names(shape: TermShape) -> dict[str, tuple[str, ...]]:
    """Return the bind names ``clause`` uses for a query of ``shape``, per kind of term."""
    counts = {
        "required": shape.required,
        "optional": shape.optional,
        "phrases": shape.phrases,
        "excluded": shape.excluded,
    }
    return {kind: tuple(f"{_PREFIXES[kind]}{i}" for i in range(n)) for kind, n in counts.items()}


def _tsquery(name: str) -> ColumnElement[Any]:
    config = sa.cast(sa.bindparam(CONFIG_BIND), REGCONFIG)
    return sa.func.phraseto_tsquery(config, sa.bindparam(name), type_=TSQUERY)


def _combine(names: Sequence[str], operator: str) -> ColumnElement[Any] | None:
    """The terms' tsqueries joined by ``&&`` or ``||`` (associative: grouped pairwise)."""
    if not names:
        return None
    return combine_pairwise(
        [_tsquery(name) for name in names],
        lambda left, right: left.op(operator, return_type=TSQUERY)(right),
    )


def _grouped(query: ColumnElement[Any]) -> ColumnElement[Any]:
    return query.self_group()


class TsvectorFullText:
    """The ``tsvector`` strategy for ``esra.sql.StatementBuilder``.

    Args:
        config: the text search configuration (``regconfig``) the terms are tokenized with;
            it must be the one the ``text_index`` column was generated with. Bound as a value.

    A mapping without ``text_index`` can only run term-less (RECENT) queries.
    """

    name = "postgres-tsvector"
    base_columns: tuple[str, ...] = ()

    def __init__(self, config: str = DEFAULT_TEXT_SEARCH_CONFIG) -> None:
        self._config = config

    @property
    def config(self) -> str:
        """The text search configuration bound into every query."""
        return self._config

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        """Match the text-index column against the bound tsqueries; score with BM25."""
        base: Any = target.base
        no_score = sa.literal_column("0.0", sa.Float)
        if not shape.positive and not shape.excluded:
            return FullTextClause(from_clause=base, predicate=None, score=no_score)
        # The vector is a configured column of the aliased relation; quoted by the dialect.
        vector = sa.column(target.text_index or "", TSVECTOR, _selectable=base)
        names = term_bind_names(shape)
        must = _combine((*names["required"], *names["phrases"]), "&&")
        may = _combine(names["optional"], "||")
        excluded = _combine(names["excluded"], "||")
        match = must if must is not None else may
        if match is None:
            assert excluded is not None  # shape.excluded > 0 here
            predicate = sa.not_(vector.op("@@", is_comparison=True)(_grouped(excluded)))
            return FullTextClause(from_clause=base, predicate=predicate, score=no_score)
        if excluded is not None:
            match = _grouped(match).op("&&", return_type=TSQUERY)(_negate(excluded))
        predicate = vector.op("@@", is_comparison=True)(_grouped(match))
        scored = (*names["required"], *names["phrases"], *names["optional"])
        bm25 = bm25_score(target, _tsquery, scored)
        return FullTextClause(from_clause=bm25.joined(base), predicate=predicate, score=bm25.score)

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return the configuration and every term's value under its bind name."""
        if not (terms.required or terms.optional or terms.phrases or terms.excluded):
            return {}
        names = term_bind_names(terms.shape)
        values: dict[str, object] = {CONFIG_BIND: self._config}
        for kind in ("required", "optional", "phrases", "excluded"):
            values.update(zip(names[kind], getattr(terms, kind), strict=True))
        return values


def _negate(query: ColumnElement[Any]) -> ColumnElement[Any]:
    """``!!(query)``: the tsquery negation, as a prefix operator."""
    return sa.sql.expression.UnaryExpression(
        _grouped(query), operator=sa.sql.operators.custom_op("!!"), type_=TSQUERY
    )
