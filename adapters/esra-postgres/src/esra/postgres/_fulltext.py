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
- the score weighs each term by its rarity: ``Σ idf(t) × ts_rank(vector, t, 1)`` (every
  occurrence weighted 1, title or body, as FTS5's ``bm25()`` does by default) over the
  required terms, phrases and optional terms, with BM25's ``idf(t) = ln(1 + (N − df + 0.5) /
  (df + 0.5))``. ``ts_rank`` alone knows nothing of the collection, so a common word
  occurring often outranked a rare one occurring once; every other engine ESRA serves (FTS5's
  ``bm25()``, InnoDB's relevance, SQL Server's and Oracle's ranks) already weighs terms by
  rarity. ``N`` is the row count PostgreSQL keeps for the relation (``pg_class.reltuples``,
  counted only when it has none) and each ``df`` an indexed ``@@`` count, in the same
  statement (an uncorrelated one-row derived table, fenced with ``OFFSET 0`` so that
  PostgreSQL evaluates it once instead of once per reference). Like those engines'
  statistics they are global, not per caller: they only order the rows a caller may see,
  and are never returned.

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

from esra.sql import FullTextClause, SearchTerms, TermShape, TextTarget

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
    combined: ColumnElement[Any] | None = None
    for name in names:
        query = _tsquery(name)
        combined = query if combined is None else combined.op(operator, return_type=TSQUERY)(query)
    return combined


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
        """Match the text-index column against the bound tsqueries; score with ``ts_rank``."""
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
        statistics = _statistics(target, scored)
        score = _weighted_rank(vector, statistics, scored)
        from_clause = base.join(statistics, sa.true())
        return FullTextClause(from_clause=from_clause, predicate=predicate, score=score)

    def bind_values(self, terms: SearchTerms) -> dict[str, object]:
        """Return the configuration and every term's value under its bind name."""
        if not (terms.required or terms.optional or terms.phrases or terms.excluded):
            return {}
        names = term_bind_names(terms.shape)
        values: dict[str, object] = {CONFIG_BIND: self._config}
        for kind in ("required", "optional", "phrases", "excluded"):
            values.update(zip(names[kind], getattr(terms, kind), strict=True))
        return values


_STATISTICS_ALIAS = "esra_stats"
# Constants as SQL text, not bind parameters: the statement's binds are the terms only.
_ONE = sa.literal_column("1.0", sa.Float)
_HALF = sa.literal_column("0.5", sa.Float)
_ZERO = sa.literal_column("0", sa.Float)
# Every occurrence counts the same, title or body, as in FTS5's bm25() and in BM25 over the
# whole record. ts_rank's default weights make one title word worth 2.5 body words, so a
# record that is only a title outranked the abstracts that discuss its subject.
_EVEN_WEIGHTS: ColumnElement[Any] = sa.literal_column("CAST('{1,1,1,1}' AS float4[])")
_DOCUMENTS = "n"


def _statistics(target: TextTarget, names: Sequence[str]) -> Any:
    """One row: the relation's row count ``n`` and, per bound term, how many rows match it."""
    relation: Any = target.base.element  # type: ignore[attr-defined]
    column = target.text_index or ""

    def rows(label: str) -> Any:
        # A fresh alias per count, so each is its own uncorrelated scalar subquery.
        return sa.table(relation.name, sa.column(column), schema=relation.schema).alias(label)

    def count(label: str, name: str) -> ColumnElement[Any]:
        matching = rows(f"esra_{label}")
        vector = sa.column(column, TSVECTOR, _selectable=matching)
        counted = sa.select(sa.func.count()).select_from(matching)
        counted = counted.where(vector.op("@@", is_comparison=True)(_tsquery(name)))
        return sa.cast(counted.scalar_subquery(), sa.Float).label(label)

    counted_size = sa.select(sa.func.count()).select_from(rows(f"esra_{_DOCUMENTS}"))
    size = sa.func.coalesce(
        _planner_row_count(relation), sa.cast(counted_size.scalar_subquery(), sa.Float)
    )
    columns = [size.label(_DOCUMENTS), *(count(f"df_{name}", name) for name in names)]
    # OFFSET 0 keeps the planner from pulling the derived table up into the outer query:
    # pulled up, every reference to ``n`` or a ``df`` became a scalar subquery of its own, so
    # the relation was counted once per scored term (three times for three terms, 9 ms each
    # on 100,000 rows). Fenced, each count runs exactly once per statement.
    fenced = sa.select(*columns).offset(sa.literal_column("0"))
    return fenced.subquery(_STATISTICS_ALIAS)


def _planner_row_count(relation: Any) -> ColumnElement[Any]:
    """The relation's row count as PostgreSQL keeps it (``pg_class.reltuples``), or NULL.

    Counting the relation is a scan of every row on every search (9 ms per 100,000 rows, most
    of a search's cost, growing with the table), while ``N`` only enters the idf through
    ``ln``: BM25's idf is about ``ln(N + 1) - ln(df + 0.5)``, so a relative error ε in ``N``
    moves every term's idf by the same ε and barely reorders anything. The engines ESRA
    serves rank with such maintained statistics too (FTS5's, InnoDB's, SQL Server's). VACUUM
    and ANALYZE (and so autovacuum) keep ``reltuples``; it is exact for a table ANALYZE reads
    whole (under 30,000 rows at the default statistics target). It is -1 for a table never
    vacuumed or analysed and has no meaning for a view: NULL then, and the caller counts.
    It counts every row, also those a row-level security policy hides from the role, as the
    other engines' statistics do; the ``df`` counts are the role's own.
    """
    quoted = ".".join(
        '"' + str(part).replace('"', '""') + '"'
        for part in (relation.schema, relation.name)
        if part is not None
    )
    # A string literal of configuration (quotes doubled), so the binds stay the terms only.
    literal: ColumnElement[str] = sa.literal_column("'" + quoted.replace("'", "''") + "'")
    pg_class = sa.table("pg_class", sa.column("oid"), sa.column("reltuples"), schema="pg_catalog")
    positive = sa.func.nullif(sa.func.greatest(pg_class.c.reltuples, _ZERO), _ZERO)
    estimate = sa.select(sa.cast(positive, sa.Float)).where(
        pg_class.c.oid == sa.func.to_regclass(literal)
    )
    return estimate.scalar_subquery()


def _weighted_rank(
    vector: ColumnElement[Any], statistics: Any, names: Sequence[str]
) -> ColumnElement[Any]:
    score: ColumnElement[Any] | None = None
    for name in names:
        df = statistics.c[f"df_{name}"]
        # A kept row count may lag a growing table behind a term's exact count; never fewer
        # documents than match, or the idf's logarithm would be of a negative number.
        documents = sa.func.greatest(statistics.c[_DOCUMENTS], df, type_=sa.Float)
        idf = sa.func.ln(_ONE + (documents - df + _HALF) / (df + _HALF), type_=sa.Float)
        rank = sa.func.ts_rank(
            _EVEN_WEIGHTS,
            vector,
            _tsquery(name),
            sa.literal_column("1", sa.Integer),
            type_=sa.Float,
        )
        term = idf * rank
        score = term if score is None else score + term
    assert score is not None  # called with at least one positive term
    return score


def _negate(query: ColumnElement[Any]) -> ColumnElement[Any]:
    """``!!(query)``: the tsquery negation, as a prefix operator."""
    return sa.sql.expression.UnaryExpression(
        _grouped(query), operator=sa.sql.operators.custom_op("!!"), type_=TSQUERY
    )
