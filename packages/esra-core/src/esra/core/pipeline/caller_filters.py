"""Caller filters: conditions the caller asks for, ANDed into every planned search.

A caller (through the tool's ``filters`` argument) may narrow a search on business fields —
``{"field": "region", "operator": "eq", "value": "emea"}`` — but gains no path around the
validator: each filter is appended to every planned query as if the planner had written it,
so the validator checks it like any other (field exists, is filterable and not restricted,
the operator is permitted for the field and the engine, the value has the field's type and
no unsafe content), binds its value as a parameter, and rejects the whole query when it
fails — a caller's narrowing is never silently dropped.

A mapping without one of the fields cannot honour the request, so its queries are not run
and its source carries ``ESRA_CALLER_FILTER_UNSUPPORTED``: running it unfiltered would
return what the caller asked to exclude.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

from esra.core.codes import WarningCode
from esra.core.pipeline.scope import EffectiveScope
from esra.core.query import PlannedFilter, PlannedQuery
from esra.core.response import ResponseWarning

__all__ = ["MAX_CALLER_FILTERS", "CallerFiltering", "apply_caller_filters", "filters_digest"]

# Far above what a search needs; each filter is one more predicate on every query.
MAX_CALLER_FILTERS = 8


@attrs.frozen
class CallerFiltering:
    """The planned queries with the caller's filters added, and the sources left out."""

    queries: tuple[PlannedQuery, ...]
    warnings: tuple[ResponseWarning, ...] = ()


def apply_caller_filters(
    queries: Sequence[PlannedQuery],
    filters: Sequence[PlannedFilter],
    *,
    scope: EffectiveScope,
    source_names: dict[str, str],
) -> CallerFiltering:
    """Add ``filters`` to each query whose mapping has every filtered field; drop the others.

    A query naming a mapping outside the scope is passed on unchanged: the validator rejects
    it for that reason, which is the more precise one.
    """
    if not filters:
        return CallerFiltering(queries=tuple(queries))
    wanted = {f.field for f in filters}
    kept: list[PlannedQuery] = []
    unsupported: list[str] = []
    for query in queries:
        scoped = scope.by_id(query.source_id)
        mapping = (
            next((m for m in scoped.mappings if m.id == query.mapping_id), None) if scoped else None
        )
        if mapping is None:
            kept.append(query)
            continue
        if all(mapping.field(name) is not None for name in wanted):
            kept.append(attrs.evolve(query, filters=(*query.filters, *filters)))
        elif query.source_id not in unsupported:
            unsupported.append(query.source_id)
    # A source with another mapping that can apply the filters is still searched there.
    searched = {q.source_id for q in kept}
    warnings = tuple(
        ResponseWarning(
            WarningCode.ESRA_CALLER_FILTER_UNSUPPORTED,
            f"{source_names.get(source_id, source_id)} was not searched: it cannot apply "
            "every requested filter.",
        )
        for source_id in unsupported
        if source_id not in searched
    )
    return CallerFiltering(queries=tuple(kept), warnings=warnings)


def filters_digest(filters: Sequence[PlannedFilter]) -> str:
    """A canonical text of ``filters`` for cache keys (order-insensitive, typed values)."""
    return json.dumps(
        sorted(
            [f.field, f.operator, [type(v).__name__ for v in _values(f)], list(_values(f))]
            for f in filters
        ),
        separators=(",", ":"),
        default=str,
    )


def _values(planned: PlannedFilter) -> tuple[object, ...]:
    value = planned.value
    return tuple(value) if isinstance(value, tuple | list) else (value,)
