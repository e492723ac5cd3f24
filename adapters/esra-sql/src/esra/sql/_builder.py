"""Build the parameterized SELECT for a ``ValidatedQuery``, once per query shape.

The statement is constructed from the query's *shape* only — the mapping's configured
identifiers, the strategy, which filters on which columns with which operators, and how many
values each carries — never from a term or a filter value. Values reach the database only
through the parameter dictionary built per execution, under deterministic bind names
(``f0_0`` for the first filter's first value, ``r0_0`` for record filters, ``p0``, ``p1``, ...
for the record-filter template's values depth-first, ``lim`` for the row cap, ``t*``/``q*``
for the full-text dialect), so equal shapes give byte-identical text. A template's literals
are bound too: no value of any origin is ever rendered into the text.
Identifiers come from configuration through ``sqlalchemy.table()``/``column()``, and the
SQLAlchemy dialect quotes them; nothing is ever compiled with ``literal_binds``.
"""

from __future__ import annotations

import operator as op
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, assert_never

import attrs
import sqlalchemy as sa
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.expression import ColumnElement, Select

from esra.core.config import FieldType, Mapping, Operator
from esra.core.ports import RenderedStatement
from esra.core.providers import (
    PredicateAnd,
    PredicateComparison,
    PredicateIsNull,
    PredicateNot,
    PredicateOr,
    RecordPredicate,
    ResolvedFilter,
    ResultRow,
    RowValue,
    Strategy,
    ValidatedQuery,
    ensure_validated,
    predicate_columns,
    predicate_values,
)
from esra.sql._cache import CompiledStatement, CompiledStatementCache
from esra.sql._fulltext import FullTextDialect, SearchTerms, TextTarget
from esra.sql._identifiers import schema_identifier

__all__ = [
    "KEY_LABEL",
    "LIMIT_BIND",
    "LOOKUP_BIND",
    "SCORE_LABEL",
    "BuiltStatement",
    "ColumnBinding",
    "StatementBuilder",
    "filter_bind_name",
    "predicate_bind_name",
]

KEY_LABEL = "esra_k"
SCORE_LABEL = "esra_s"
LIMIT_BIND = "lim"
LOOKUP_BIND = "lk"
BASE_ALIAS = "b"

# Positional paramstyles would tie the parameter order to the compiler's traversal; named
# styles let one dictionary serve every execution of a cached text.
_NAMED_PARAMSTYLES = frozenset({"named", "pyformat"})

_COMPARISONS: dict[Operator, Callable[[Any, Any], Any]] = {
    Operator.EQ: op.eq,
    Operator.NE: op.ne,
    Operator.LT: op.lt,
    Operator.LTE: op.le,
    Operator.GT: op.gt,
    Operator.GTE: op.ge,
}


def predicate_bind_name(index: int) -> str:
    """Return the bind name of value ``index`` of the record predicate (``p0``, ``p1``, ...).

    ``index`` counts the predicate's values depth-first, left to right: the order of
    ``esra.core.providers.predicate_values``.
    """
    return f"p{index}"


def filter_bind_name(prefix: str, index: int, position: int) -> str:
    """Return the bind name of value ``position`` of filter ``index`` (``f`` or ``r`` prefix)."""
    return f"{prefix}{index}_{position}"


@attrs.frozen
class ColumnBinding:
    """One projected column: its positional label in the SELECT and the business field name."""

    label: str
    field: str
    column: str


@attrs.frozen(eq=False)
class BuiltStatement:
    """Command text, this execution's parameters, and how result columns map back.

    The result's first column is the record key, the second the score, then one column per
    entry of ``columns`` in order: the query's projection, then its freshness field if the
    projection lacks it (aggregation weighs it; response assembly re-applies the allowlist).
    """

    sql: str
    params: dict[str, object]
    columns: tuple[ColumnBinding, ...]

    def to_row(self, raw: Sequence[Any]) -> ResultRow:
        """Turn one driver row into a ``ResultRow`` keyed by business field names."""
        values = {b.field: _row_value(raw[i + 2]) for i, b in enumerate(self.columns)}
        score = raw[1]
        return ResultRow(key=str(raw[0]), score=float(score or 0.0), values=values)


def _row_value(value: object) -> RowValue:
    if value is None or isinstance(value, str | bool | int | float | date | datetime):
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


class StatementBuilder:
    """Builds and caches the SELECT for validated queries, for one SQLAlchemy dialect.

    Args:
        dialect: a SQLAlchemy ``Dialect`` instance with a named paramstyle (``named`` or
            ``pyformat``), e.g. ``sqlalchemy.dialects.sqlite.dialect(paramstyle="named")``.
        fulltext: the engine's ``FullTextDialect``.
        cache: where compiled text is kept; a fresh 256-entry LRU by default, and
            ``CompiledStatementCache(0)`` to compile every time.
        record_text_collation: the collation record-level security compares text fields
            under, for an engine whose column collations ignore case, accents or width
            (MySQL/MariaDB: ``utf8mb4_bin``); ``None`` keeps the column's own comparison.
            Under ``utf8mb4_unicode_ci`` a claim ``EMEA`` or ``émea`` matched rows of
            ``emea``: a claim must name a row's value exactly to see it, as on the engines
            whose comparisons are exact.
        default_schema: the schema a mapping that names none is read from, written into the
            statement; ``None`` leaves such a relation unqualified, for the session's search
            path to find. An engine that narrows the search path to its system schema (so no
            other schema's functions or operators can be chosen for the statement's calls)
            needs every relation qualified.

    Raises:
        ValueError: if the dialect uses a positional paramstyle.
    """

    def __init__(
        self,
        dialect: Dialect,
        fulltext: FullTextDialect,
        *,
        cache: CompiledStatementCache | None = None,
        record_text_collation: str | None = None,
        default_schema: str | None = None,
    ) -> None:
        if dialect.paramstyle not in _NAMED_PARAMSTYLES:
            msg = "the dialect must use a named paramstyle ('named' or 'pyformat')"
            raise ValueError(msg)
        self._dialect = dialect
        self._fulltext = fulltext
        self._cache = cache if cache is not None else CompiledStatementCache()
        self._record_text_collation = record_text_collation
        self._default_schema = default_schema
        self._dialect_key = (
            type(dialect).__module__,
            type(dialect).__qualname__,
            dialect.name,
            dialect.paramstyle,
            fulltext.name,
            record_text_collation,
            default_schema,
        )

    @property
    def cache(self) -> CompiledStatementCache:
        """The compiled-statement cache this builder uses."""
        return self._cache

    def build(self, query: ValidatedQuery) -> BuiltStatement:
        """Return the command text for ``query``'s shape and this execution's parameters.

        Raises:
            UnvalidatedQueryError: if ``query`` was not issued by the validator.
            ValueError: if the query's structure cannot be expressed (an empty ``IN``, a
                scalar operator with several values); the validator never issues such a query.
        """
        query = ensure_validated(query)
        key: Hashable = (self._dialect_key, query.shape)
        compiled = self._cache.get_or_compile(key, lambda: self.compile(query))
        params: dict[str, object] = dict(compiled.constants)
        if query.lookup_key is None:
            params.update(self._fulltext.bind_values(_terms(query)))
        else:
            params[LOOKUP_BIND] = query.lookup_key
        params.update(_filter_params("f", query.filters))
        params.update(_filter_params("r", query.record_filters))
        params.update(_predicate_params(query.record_predicate))
        params[LIMIT_BIND] = query.row_limit
        return BuiltStatement(sql=compiled.sql, params=params, columns=_bindings(query))

    def render(self, query: ValidatedQuery) -> RenderedStatement:
        """The command text ``build`` gives for ``query`` and its parameters' names only.

        What operator explain shows: values are left out, since a term or a filter value may
        be as sensitive as the prompt, and a record filter's value comes from a claim.
        """
        built = self.build(query)
        return RenderedStatement(text=built.sql, parameters=tuple(sorted(built.params)))

    def compile(self, query: ValidatedQuery) -> CompiledStatement:
        """Compile ``query``'s statement now, bypassing the cache."""
        compiled = self.statement(query).compile(dialect=self._dialect)
        sql = compiled.string
        if "POSTCOMPILE" in sql:
            # Post-compile binds are expanded by SQLAlchemy's execution layer, which the
            # providers do not use; every value must be an ordinary named bind.
            msg = "the statement needs post-compile expansion"
            raise ValueError(msg)
        # ``binds`` also lists an anonymous bind under its unrendered key; ``bind_names``
        # gives the name the statement text actually uses, once per bind.
        constants = {
            compiled.bind_names[bind]: bind.value
            for bind in dict.fromkeys(compiled.binds.values())
            if bind.value is not None
        }
        return CompiledStatement(sql=sql, constants=constants)

    def statement(self, query: ValidatedQuery) -> Select[Any]:
        """Return the SQLAlchemy ``Select`` for ``query``'s shape (no values attached)."""
        if query.lookup_key is not None:
            return self._lookup_statement(query)
        mapping = query.mapping
        schema = self._schema(mapping)
        base = _base_table(mapping, schema, query, self._fulltext.base_columns)
        key = base.c[mapping.record_key]
        target = TextTarget(
            base=base,
            key=key,
            searchable=tuple(base.c[name] for name in _searchable_columns(mapping)),
            text_index=mapping.text_index,
            schema=schema,
            visible=lambda columns: _record_conditions(columns, query, self._record_text_collation),
        )
        text = self._fulltext.clause(target, _terms(query).shape)
        key_col = key.label(KEY_LABEL)
        score_col = text.score.label(SCORE_LABEL)
        projected = [base.c[binding.column].label(binding.label) for binding in _bindings(query)]
        conditions: list[ColumnElement[bool]] = []
        if text.predicate is not None:
            conditions.append(text.predicate)
        conditions.extend(_conditions(base.c, "f", query.filters))
        conditions.extend(_record_conditions(base.c, query, self._record_text_collation))
        order: list[ColumnElement[Any]] = [score_col.desc(), key_col.asc()]
        if query.strategy is Strategy.RECENT and query.freshness is not None:
            order.insert(0, base.c[query.freshness.column].desc())
        return (
            sa.select(key_col, score_col, *projected)
            .select_from(text.from_clause)
            .where(*conditions)
            .order_by(*order)
            .limit(sa.bindparam(LIMIT_BIND, type_=sa.Integer))
        )

    def _schema(self, mapping: Mapping) -> str | None:
        """The schema the statement names for ``mapping``'s relation, as the dialect takes it."""
        schema = mapping.schema or self._default_schema
        return schema_identifier(schema, self._dialect.identifier_preparer)

    def _lookup_statement(self, query: ValidatedQuery) -> Select[Any]:
        """Read one record by key for a document fetch: no full-text clause, no score.

        The record filters are the same bound predicates a search carries, so a fetch can
        only ever read what the caller's current claims would let a search return. Parts of
        a multi-part record come back in their configured order.
        """
        mapping = query.mapping
        part = [mapping.part_order_column] if mapping.part_order_column else []
        base = _base_table(mapping, self._schema(mapping), query, part)
        key = base.c[mapping.record_key]
        projected = [base.c[binding.column].label(binding.label) for binding in _bindings(query)]
        conditions: list[ColumnElement[bool]] = [key == sa.bindparam(LOOKUP_BIND)]
        # A lookup carries no filters of its own; any it did carry could only narrow it.
        conditions.extend(_conditions(base.c, "f", query.filters))
        conditions.extend(_record_conditions(base.c, query, self._record_text_collation))
        order = [base.c[column].asc() for column in part]
        return (
            sa.select(key.label(KEY_LABEL), sa.literal(1.0).label(SCORE_LABEL), *projected)
            .select_from(base)
            .where(*conditions)
            .order_by(*order, key.asc())
            .limit(sa.bindparam(LIMIT_BIND, type_=sa.Integer))
        )


def _terms(query: ValidatedQuery) -> SearchTerms:
    return SearchTerms(
        required=query.required_terms,
        optional=query.optional_terms,
        excluded=query.excluded_terms,
        phrases=query.phrases,
    )


def _bindings(query: ValidatedQuery) -> tuple[ColumnBinding, ...]:
    """The projection, plus the freshness field (aggregation weighs it) when not projected."""
    fields = list(query.projection)
    if query.freshness is not None and all(p.name != query.freshness.name for p in fields):
        fields.append(query.freshness)
    return tuple(
        ColumnBinding(label=f"esra_c{i}", field=p.name, column=p.column)
        for i, p in enumerate(fields)
    )


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _searchable_columns(mapping: Mapping) -> list[str]:
    marked = [f.column for f in mapping.fields if f.is_searchable]
    if marked:
        return marked
    named = (mapping.field(n) for n in (mapping.title_field, *mapping.content_fields))
    return _unique(f.column for f in named if f is not None)


def _base_table(
    mapping: Mapping, schema: str | None, query: ValidatedQuery, extra: Iterable[str]
) -> Any:
    names = _unique(
        [
            mapping.record_key,
            *(f.column for f in mapping.fields),
            *(p.column for p in query.projection),
            *(f.column for f in (*query.filters, *query.record_filters)),
            *(predicate_columns(query.record_predicate) if query.record_predicate else ()),
            *([query.freshness.column] if query.freshness else []),
            *extra,
        ]
    )
    table = sa.table(mapping.relation, *(sa.column(n) for n in names), schema=schema)
    return table.alias(BASE_ALIAS)


def _filter_params(prefix: str, filters: Sequence[ResolvedFilter]) -> dict[str, object]:
    return {
        filter_bind_name(prefix, i, j): value
        for i, flt in enumerate(filters)
        for j, value in enumerate(flt.values)
    }


def _record_conditions(
    columns: Any, query: ValidatedQuery, collation: str | None
) -> list[ColumnElement[bool]]:
    """What the query's record filters and record predicate require of a row of ``columns``
    (text compared under ``collation`` when one is given: ``StatementBuilder``)."""
    filters = [
        _record_condition(
            columns[flt.column],
            flt.operator,
            [sa.bindparam(filter_bind_name("r", i, j)) for j in range(len(flt.values))],
            flt.type,
            collation,
        )
        for i, flt in enumerate(query.record_filters)
    ]
    return [*filters, *_predicate_conditions(columns, query.record_predicate, collation)]


def _record_condition(
    column: ColumnElement[Any],
    operator: Operator,
    binds: list[sa.BindParameter[Any]],
    field_type: FieldType,
    collation: str | None,
) -> ColumnElement[bool]:
    condition = _condition(column, operator, binds)
    if collation is None or field_type is not FieldType.TEXT:
        return condition
    exact = _condition(column, operator, [sa.collate(bind, collation) for bind in binds])
    if operator in (Operator.EQ, Operator.IN):
        # The column's own comparison can use its index to narrow the rows; the exact one
        # decides. (Under the exact collation alone no index on the column applies.)
        return sa.and_(condition, exact)
    return exact


def _predicate_params(predicate: RecordPredicate | None) -> dict[str, object]:
    if predicate is None:
        return {}
    return {
        predicate_bind_name(i): value for i, (_, value) in enumerate(predicate_values(predicate))
    }


def _predicate_conditions(
    columns: Any, predicate: RecordPredicate | None, collation: str | None
) -> list[ColumnElement[bool]]:
    if predicate is None:
        return []
    names = (predicate_bind_name(i) for i in range(len(predicate_values(predicate))))
    condition = _predicate_condition(columns, predicate, names, collation)
    if next(names, None) is not None:  # pragma: no cover — both walks are depth-first
        msg = "the record predicate rendered fewer binds than it has values"
        raise ValueError(msg)
    return [condition]


def _predicate_condition(
    columns: Any, predicate: RecordPredicate, names: Iterator[str], collation: str | None
) -> ColumnElement[bool]:
    """Render ``predicate``; ``names`` yields bind names in ``predicate_values`` order."""
    match predicate:
        case PredicateComparison(column=column, type=field_type, operator=operator, values=values):
            binds: list[sa.BindParameter[Any]] = [sa.bindparam(next(names)) for _ in values]
            return _record_condition(columns[column], operator, binds, field_type, collation)
        case PredicateIsNull(column=column, negated=negated):
            target: ColumnElement[Any] = columns[column]
            return target.is_not(None) if negated else target.is_(None)
        case PredicateAnd(operands=operands) | PredicateOr(operands=operands) if not operands:
            # An empty AND/OR has no SQL spelling that every engine agrees on.
            msg = "an AND/OR record predicate needs at least one operand"
            raise ValueError(msg)
        case PredicateAnd(operands=operands):
            return sa.and_(*(_predicate_condition(columns, o, names, collation) for o in operands))
        case PredicateOr(operands=operands):
            return sa.or_(*(_predicate_condition(columns, o, names, collation) for o in operands))
        case PredicateNot(operand=operand):
            return sa.not_(_predicate_condition(columns, operand, names, collation))
        case _:  # pragma: no cover — RecordPredicate is closed
            assert_never(predicate)


def _conditions(
    columns: Any, prefix: str, filters: Sequence[ResolvedFilter]
) -> list[ColumnElement[bool]]:
    out: list[ColumnElement[bool]] = []
    for i, flt in enumerate(filters):
        column = columns[flt.column]
        binds: list[sa.BindParameter[Any]] = [
            sa.bindparam(filter_bind_name(prefix, i, j)) for j in range(len(flt.values))
        ]
        out.append(_condition(column, flt.operator, binds))
    return out


def _condition(
    column: ColumnElement[Any], operator: Operator, binds: Sequence[ColumnElement[Any]]
) -> ColumnElement[bool]:
    if operator is Operator.IN:
        if not binds:
            msg = "an IN filter needs at least one value"
            raise ValueError(msg)
        # A list of explicit binds renders as (:f0_0, :f0_1, ...) — no expanding parameter.
        return column.in_(binds)
    if len(binds) != 1:
        msg = "a scalar filter operator needs exactly one value"
        raise ValueError(msg)
    compare: Callable[[Any, Any], ColumnElement[bool]] = _COMPARISONS[operator]
    return compare(column, binds[0])
