"""What the two store-search benches share: the seeded shape, the caller and its query.

``bench/docstore_search.py`` (PostgreSQL) and ``bench/sqlite_store_search.py`` (SQLite)
search stores of the same shape with the same questions, so their figures compare.
"""

from __future__ import annotations

from collections.abc import Sequence

from esra.core._config.mapping import FieldType, Mapping, Operator
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy

__all__ = [
    "QUERIES",
    "SEGMENTS_PER_DOCUMENT",
    "TENANT",
    "VOCABULARY",
    "WARMUP",
    "WORDS_PER_SEGMENT",
    "caller_filters",
    "keyword_query",
    "percentile",
]

VOCABULARY = 20_000
WORDS_PER_SEGMENT = 50
SEGMENTS_PER_DOCUMENT = 10
TENANT = "t3"
QUERIES = 300
WARMUP = 30


def caller_filters() -> tuple[ResolvedFilter, ...]:
    """The searching caller's record filters: its tenant, and two of the four scopes."""
    return (
        ResolvedFilter("tenant_id", FieldType.TEXT, Operator.EQ, (TENANT,)),
        ResolvedFilter("scope", FieldType.TEXT, Operator.IN, ("s1", "s2")),
    )


def keyword_query(
    mapping: Mapping,
    terms: Sequence[str],
    n: int,
    *,
    record_filters: tuple[ResolvedFilter, ...],
    projection: tuple[ProjectedField, ...],
) -> ValidatedQuery:
    """A keyword query of ``terms`` ORed, 10 rows, issued directly (as the provider tests
    do): the benches measure execution, not planning."""
    return _issue(
        query_id=f"document_store#{n}",
        source_id=mapping.source_id,
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=tuple(terms),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=record_filters,
        projection=projection,
        freshness=None,
        row_limit=10,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
