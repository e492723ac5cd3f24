"""InMemorySearchProvider: a SearchProvider over Python rows, honouring the provider contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from esra.core.codes import ProviderErrorCode
from esra.core.config.mapping import Operator
from esra.core.config.source import SourceHealth
from esra.core.exceptions import ProviderError
from esra.core.ports import ProviderCapabilities, TextIndexKind
from esra.core.query import ResolvedFilter, ResultRow, Scalar, Strategy
from esra.core.validation import ValidatedQuery, ensure_validated

__all__ = ["InMemorySearchProvider"]


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
        hits: list[ResultRow] = []
        for row in self._rows.get(mapping.id, []):
            if not all(_matches(row, f) for f in (*query.filters, *query.record_filters)):
                continue
            score = _score(query, " ".join(str(row.get(c, "")) for c in columns).lower())
            if score is None:
                continue
            fields = (*query.projection, *((query.freshness,) if query.freshness else ()))
            values = {p.name: row.get(p.column) for p in fields}
            hits.append(ResultRow(key=str(row[mapping.record_key]), score=score, values=values))
        hits.sort(key=lambda r: (-r.score, r.key))
        return hits[: query.row_limit]


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
