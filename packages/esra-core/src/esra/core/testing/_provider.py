"""InMemorySearchProvider: a SearchProvider over Python rows, honouring the provider contract."""

from __future__ import annotations

import operator as op
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, assert_never

from esra.core._config.mapping import Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery, ensure_validated
from esra.core._query import ResolvedFilter, ResultRow, Scalar, Strategy
from esra.core._record_predicate import (
    PredicateAnd,
    PredicateComparison,
    PredicateIsNull,
    PredicateNot,
    PredicateOr,
    RecordPredicate,
)
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.ports import ProviderCapabilities, TextIndexKind

__all__ = ["InMemorySearchProvider"]

_COMPARISONS: dict[Operator, Callable[[Any, Any], Any]] = {
    Operator.EQ: op.eq,
    Operator.NE: op.ne,
    Operator.LT: op.lt,
    Operator.LTE: op.le,
    Operator.GT: op.gt,
    Operator.GTE: op.ge,
}


def _matches(row: Mapping[str, Any], flt: ResolvedFilter) -> bool:
    value = row.get(flt.column)
    if value is None:
        return False
    first: Scalar = flt.values[0]
    try:
        match flt.operator:
            case Operator.EQ:
                return bool(value == first)
            case Operator.NE:
                return bool(value != first)
            case Operator.LT:
                return bool(value < first)
            case Operator.LTE:
                return bool(value <= first)
            case Operator.GT:
                return bool(value > first)
            case Operator.GTE:
                return bool(value >= first)
            case Operator.IN:
                return value in flt.values
    except TypeError:
        return False


def _holds(row: Mapping[str, Any], predicate: RecordPredicate) -> bool | None:
    """Evaluate ``predicate`` over ``row`` in SQL's three-valued logic (``None``: unknown).

    The SQL engines see ``NOT archived = TRUE`` as unknown for a NULL ``archived`` and leave
    the row out; this evaluation must agree, or the fake would admit rows they do not.
    """
    match predicate:
        case PredicateIsNull(column=column, negated=negated):
            return (row.get(column) is None) is not negated
        case PredicateComparison(column=column, operator=operator, values=values):
            return _compare(row.get(column), operator, values)
        case PredicateAnd(operands=operands) | PredicateOr(operands=operands) if not operands:
            # As in the SQL builder: a forged empty node is an error, never "admit everything".
            msg = "an AND/OR record predicate needs at least one operand"
            raise ValueError(msg)
        case PredicateNot(operand=operand):
            inner = _holds(row, operand)
            return None if inner is None else not inner
        case PredicateAnd(operands=operands):
            results = [_holds(row, o) for o in operands]
            if False in results:
                return False
            return None if None in results else True
        case PredicateOr(operands=operands):
            results = [_holds(row, o) for o in operands]
            if True in results:
                return True
            return None if None in results else False
        case _:  # pragma: no cover — RecordPredicate is closed
            assert_never(predicate)


def _compare(value: object, operator: Operator, values: tuple[Scalar, ...]) -> bool | None:
    if value is None:
        return None
    if isinstance(value, date | datetime):
        # DATE values are bound as ISO strings; rows may hold real dates.
        value = (value.date() if isinstance(value, datetime) else value).isoformat()
    try:
        if operator is Operator.IN:
            return value in values
        compare: Callable[[Any, Any], Any] = _COMPARISONS[operator]
        return bool(compare(value, values[0]))
    except TypeError:
        # Incomparable types are unknown, never a match and never a negated match.
        return None


class InMemorySearchProvider:
    """Searches rows held in memory, keyed by mapping id; rows use physical column names.

    Scoring counts term occurrences in the mapping's content and title columns. Set
    ``fail_with`` (and ``fail_times``) to make executions raise a classified error.
    """

    def __init__(
        self,
        rows: Mapping[str, Sequence[Mapping[str, Any]]],
        *,
        strategies: frozenset[Strategy] = frozenset(Strategy),
        operators: frozenset[Operator] = frozenset(Operator),
        health: SourceHealth = SourceHealth.HEALTHY,
    ) -> None:
        self._rows = {k: [dict(r) for r in v] for k, v in rows.items()}
        self._capabilities = ProviderCapabilities(
            strategies=strategies, operators=operators, text_index=TextIndexKind.IN_MEMORY
        )
        self.health_state = health
        self.fail_with: ProviderErrorCode | None = None
        self.fail_times: int | None = None
        self.executed: list[ValidatedQuery] = []

    @property
    def capabilities(self) -> ProviderCapabilities:
        """All strategies and operators unless narrowed at construction."""
        return self._capabilities

    async def health(self) -> SourceHealth:
        """Return the configured health state."""
        return self.health_state

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        """Search the mapping's rows for ``query``; refuse anything unvalidated."""
        query = ensure_validated(query)
        self.executed.append(query)
        if self.fail_with is not None and (self.fail_times is None or self.fail_times > 0):
            if self.fail_times is not None:
                self.fail_times -= 1
            raise ProviderError(self.fail_with)
        mapping = query.mapping
        names = (mapping.title_field, *mapping.content_fields)
        columns = [spec.column for spec in map(mapping.field, names) if spec is not None]
        hits: list[tuple[float, str, Any, ResultRow]] = []
        for row in self._rows.get(mapping.id, []):
            if not all(_matches(row, f) for f in (*query.filters, *query.record_filters)):
                continue
            # Only TRUE admits a row: unknown (a NULL compared) excludes it, as in SQL.
            if query.record_predicate is not None and not _holds(row, query.record_predicate):
                continue
            if query.lookup_key is not None:
                if str(row.get(mapping.record_key)) != query.lookup_key:
                    continue
                score: float | None = 1.0
            else:
                score = _score(query, " ".join(str(row.get(c, "")) for c in columns).lower())
            if score is None:
                continue
            fields = (*query.projection, *((query.freshness,) if query.freshness else ()))
            values = {p.name: row.get(p.column) for p in fields}
            # Parts of a multi-part record come back in their configured order.
            part = row.get(mapping.part_order_column, 0) if mapping.part_order_column else 0
            hit = ResultRow(key=str(row[mapping.record_key]), score=score, values=values)
            hits.append((-score, hit.key, part, hit))
        hits.sort(key=lambda h: h[:3])
        return [h[3] for h in hits[: query.row_limit]]


def _score(query: ValidatedQuery, text: str) -> float | None:
    if any(term.lower() in text for term in query.excluded_terms):
        return None
    if not all(term.lower() in text for term in query.required_terms):
        return None
    if not all(phrase.lower() in text for phrase in query.phrases):
        return None
    optional = [t.lower() for t in query.optional_terms]
    score = float(sum(text.count(t) for t in optional))
    score += sum(text.count(t.lower()) for t in (*query.required_terms, *query.phrases))
    if optional and not (query.required_terms or query.phrases) and score == 0:
        return None
    if query.strategy is not Strategy.RECENT and score == 0:
        return None
    return score
