"""The search-plan and result value types that flow between pipeline stages and providers."""

from __future__ import annotations

from collections.abc import Mapping as MappingABC
from datetime import date, datetime
from enum import StrEnum

import attrs

from esra.core._config.mapping import FieldType, Operator

__all__ = [
    "FilterValue",
    "PlannedFilter",
    "PlannedQuery",
    "ProjectedField",
    "ResolvedFilter",
    "ResultRow",
    "Scalar",
    "Strategy",
]

Scalar = str | int | float | bool
FilterValue = Scalar | tuple[Scalar, ...]
RowValue = str | int | float | bool | date | datetime | None


class Strategy(StrEnum):
    """The six search strategies a planner may choose from."""

    PHRASE = "phrase"
    KEYWORD = "keyword"
    SYNONYM = "synonym"
    ACRONYM = "acronym"
    ENTITY = "entity"
    RECENT = "recent"


@attrs.frozen
class PlannedFilter:
    """A structured filter as the planner wrote it: business field, operator, value."""

    field: str
    operator: str
    value: FilterValue


@attrs.frozen
class PlannedQuery:
    """One search as planned (by a model or the default template). Untrusted until validated."""

    source_id: str
    mapping_id: str
    strategy: str
    required_terms: tuple[str, ...] = ()
    optional_terms: tuple[str, ...] = ()
    excluded_terms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    filters: tuple[PlannedFilter, ...] = ()
    fields: tuple[str, ...] = ()
    limit: int | None = None


@attrs.frozen
class ResolvedFilter:
    """A filter after validation: physical column, checked operator, typed values.

    Values are always sent as bind parameters; ``column`` comes from configuration only.
    """

    column: str
    type: FieldType
    operator: Operator
    values: tuple[Scalar, ...]


@attrs.frozen
class ProjectedField:
    """A business field a provider must return, with the physical column it reads."""

    name: str
    column: str


@attrs.frozen
class ResultRow:
    """One row as a provider returns it: record key, native score, business-named values."""

    key: str
    score: float
    values: MappingABC[str, RowValue] = attrs.field(factory=dict)
