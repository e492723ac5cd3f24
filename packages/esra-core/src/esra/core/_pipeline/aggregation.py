"""Stage 6 — normalize each query's scores, weight them, and merge cross-query duplicates.

Native provider scores are only ever compared within the query that produced them: each
query's rows are min-max normalized over that query's own result set, so a source whose
engine scores in the thousands cannot crowd out one that scores below one. The native score
is kept verbatim in the provenance for audit and debugging, never used across sources.
"""

from __future__ import annotations

import math
from collections.abc import Mapping as AbcMapping
from collections.abc import Sequence
from datetime import UTC, date, datetime

import attrs

from esra.core._config.mapping import Mapping
from esra.core._pipeline.execution import QueryResult
from esra.core._query import ResultRow, RowValue, Strategy

__all__ = [
    "EXTRA_MATCH_BONUS",
    "MAX_EXTRA_MATCH_BONUS",
    "Candidate",
    "Provenance",
    "aggregate",
    "extra_match_bonus",
    "freshness_weight",
    "normalize",
]

EXTRA_MATCH_BONUS = 0.02
MAX_EXTRA_MATCH_BONUS = 0.1
_SECONDS_PER_YEAR = 365.25 * 24 * 3600


@attrs.frozen
class Provenance:
    """How one query found a candidate.

    ``native_score`` is the provider's score verbatim: meaningful only within its own query.
    """

    query_id: str
    strategy: Strategy
    native_score: float
    normalized: float
    weighted: float


@attrs.frozen
class Candidate:
    """A distinct record found by one or more queries, with its best weighted score.

    ``values`` are those of the best-weighted row, still unfiltered and unmasked: the response
    stage applies the allowlist and masking, and reranking shows title and content fields only.
    """

    source_id: str
    mapping: Mapping
    key: str
    values: AbcMapping[str, RowValue]
    best_weighted: float
    bonus: float
    provenance: tuple[Provenance, ...]
    matched_terms: tuple[str, ...] = ()

    @property
    def weighted(self) -> float:
        """The best weighted score plus the extra-match bonus."""
        return self.best_weighted + self.bonus


def normalize(scores: Sequence[float]) -> list[float]:
    """Min-max normalize ``scores`` into 0..1: ``(s − min) / (max − min)``, all 1.0 when equal.

    A non-finite score (a provider bug) is treated as the worst finite score (NaN, −inf) or the
    best (+inf), so one bad row cannot poison the rest of its query.
    """
    finite = [s for s in scores if math.isfinite(s)]
    if not finite:
        return [1.0] * len(scores)
    low, high = min(finite), max(finite)
    cleaned = [s if math.isfinite(s) else (high if s == math.inf else low) for s in scores]
    if high == low:
        return [1.0] * len(scores)
    span = high - low
    if math.isfinite(span):
        raw = [(s - low) / span for s in cleaned]
    else:
        # Scores near the float limits: halve everything first so the difference cannot overflow.
        raw = [(s / 2 - low / 2) / (high / 2 - low / 2) for s in cleaned]
    return [min(1.0, max(0.0, r)) for r in raw]


def _as_datetime(value: RowValue) -> datetime | None:
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    # A naive timestamp from a provider is read as UTC, the only zone ESRA stores in.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def freshness_weight(value: RowValue, now: datetime) -> float:
    """Return ``1 / (1 + 0.5 × age in years)`` for the row's freshness value.

    A missing or unparseable value, or one in the future, weighs 1.0: freshness is a tiebreak
    for dated records, not a penalty for undated ones.
    """
    moment = _as_datetime(value)
    if moment is None:
        return 1.0
    reference = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    years = (reference - moment).total_seconds() / _SECONDS_PER_YEAR
    if years <= 0:
        return 1.0
    return 1.0 / (1.0 + 0.5 * years)


def extra_match_bonus(matches: int) -> float:
    """Return the bonus for being found by ``matches`` distinct queries: +0.02 per extra, ≤ 0.1."""
    return min(EXTRA_MATCH_BONUS * max(0, matches - 1), MAX_EXTRA_MATCH_BONUS)


@attrs.frozen
class _Hit:
    provenance: Provenance
    source_id: str
    mapping: Mapping
    row: ResultRow
    terms: tuple[str, ...]


def _query_hits(result: QueryResult, priority: float, now: datetime) -> list[_Hit]:
    query = result.query
    terms = tuple(
        t for t in (*query.phrases, *query.required_terms, *query.optional_terms) if t.strip()
    )
    # A provider that returns one key twice contributes its best row once: the bonus counts
    # distinct queries, not rows.
    best_rows: dict[str, tuple[float, float, ResultRow]] = {}
    normalized = normalize([row.score for row in result.rows])
    for row, norm in zip(result.rows, normalized, strict=True):
        fresh = 1.0
        if query.freshness is not None:
            fresh = freshness_weight(row.values.get(query.freshness.name), now)
        weighted = norm * priority * fresh
        previous = best_rows.get(row.key)
        if previous is None or weighted > previous[1]:
            best_rows[row.key] = (norm, weighted, row)
    return [
        _Hit(
            provenance=Provenance(
                query_id=query.query_id,
                strategy=query.strategy,
                native_score=row.score,
                normalized=norm,
                weighted=weighted,
            ),
            source_id=query.source_id,
            mapping=query.mapping,
            row=row,
            terms=terms,
        )
        for norm, weighted, row in best_rows.values()
    ]


def _merge(hits: list[_Hit]) -> Candidate:
    # Highest weighted first; query id breaks ties so the kept values never depend on the order
    # in which results arrived.
    hits.sort(key=lambda h: (-h.provenance.weighted, h.provenance.query_id))
    best = hits[0]
    terms: dict[str, None] = {}
    for hit in hits:
        terms.update(dict.fromkeys(hit.terms))
    return Candidate(
        source_id=best.source_id,
        mapping=best.mapping,
        key=best.row.key,
        values=dict(best.row.values),
        best_weighted=best.provenance.weighted,
        bonus=extra_match_bonus(len({h.provenance.query_id for h in hits})),
        provenance=tuple(h.provenance for h in hits),
        matched_terms=tuple(terms),
    )


def aggregate(
    results: Sequence[QueryResult], *, priority: AbcMapping[str, float], now: datetime
) -> list[Candidate]:
    """Normalize, weight and deduplicate every query's rows into ranked candidates.

    Args:
        results: the successful queries' rows.
        priority: each source's priority weight (a source absent from it weighs 1.0).
        now: the invocation's time, for freshness weighting.

    Returns:
        Candidates sorted by (−weighted, source id, mapping id, key).
    """
    grouped: dict[tuple[str, str, str], list[_Hit]] = {}
    for result in results:
        weight = priority.get(result.query.source_id, 1.0)
        for hit in _query_hits(result, weight, now):
            grouped.setdefault((hit.source_id, hit.mapping.id, hit.row.key), []).append(hit)
    candidates = [_merge(hits) for hits in grouped.values()]
    candidates.sort(key=lambda c: (-c.weighted, c.source_id, c.mapping.id, c.key))
    return candidates
