"""A small, fully described world for the validator and executor tests.

Source ``s-1`` has mapping ``m-1`` with one field of each kind the rules care about; source
``s-2`` has a plain mapping ``m-s-2``; source ``s-3`` is in scope but never selected. Built on
the shared builders in ``tests.core.factories``.
"""

from __future__ import annotations

from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from typing import Any

import attrs

from esra.core._config.mapping import DefaultTemplate
from esra.core._context import ClaimValue, InvocationContext
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core._pipeline.selection import Selection
from esra.core._pipeline.validation import ValidationOutcome, validate
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import PlannedQuery, Strategy
from esra.core.config import CapabilityLimits, FieldType, Mapping, Operator, RecordFilter
from esra.core.ports import ProviderCapabilities, TextIndexKind
from tests.core.factories import (
    make_context,
    make_field,
    make_mapping,
    make_scope,
    make_scoped,
    make_source,
)

__all__ = [
    "ALL_CAPS",
    "RICH_FIELDS",
    "World",
    "issue",
    "keyword",
    "make_world",
    "rich_mapping",
    "with_record_filter",
]

_TEXT_OPS = (Operator.EQ, Operator.NE, Operator.IN)
_ORDER_OPS = (Operator.EQ, Operator.LT, Operator.LTE, Operator.GT, Operator.GTE, Operator.IN)

RICH_FIELDS = (
    make_field("title"),
    make_field("body"),
    make_field("status", filterable=True, operators=_TEXT_OPS),
    make_field("year", type=FieldType.INTEGER, filterable=True, operators=_ORDER_OPS),
    make_field("amount", type=FieldType.NUMBER, filterable=True, operators=_ORDER_OPS),
    make_field("active", type=FieldType.BOOLEAN, filterable=True, operators=(Operator.EQ,)),
    make_field("published_on", type=FieldType.DATE, filterable=True, operators=_ORDER_OPS),
    make_field("salary", restricted=True, filterable=True, operators=(Operator.EQ,)),
    make_field("internal_notes", returnable=False),
    make_field("dept", returnable=False, filterable=False),
)

ALL_CAPS = ProviderCapabilities(
    strategies=frozenset(Strategy),
    operators=frozenset(Operator),
    text_index=TextIndexKind.IN_MEMORY,
    max_rows=200,
)


def rich_mapping(**overrides: Any) -> Mapping:
    """The mapping ``m-1`` of ``s-1``: every field kind, a freshness field, default limit 10."""
    values: dict[str, Any] = {
        "freshness_field": "published_on",
        "default_template": DefaultTemplate(limit=10, fields=("status",)),
    }
    values.update(overrides)
    return make_mapping("m-1", source_id="s-1", fields=RICH_FIELDS, **values)


@attrs.frozen
class World:
    """Everything ``validate`` needs, plus a shortcut to run it."""

    ctx: InvocationContext
    selection: Selection
    scope: EffectiveScope
    capabilities: MappingABC[str, ProviderCapabilities]

    def validate(self, planned: Sequence[PlannedQuery]) -> ValidationOutcome:
        """Run the validator over ``planned`` in this world."""
        return validate(
            planned,
            ctx=self.ctx,
            selection=self.selection,
            scope=self.scope,
            capabilities=self.capabilities,
        )


def make_world(
    *,
    m1: Mapping | None = None,
    s1_max_queries: int = 3,
    limits: CapabilityLimits | None = None,
    claims: MappingABC[str, ClaimValue] | None = None,
    capabilities: MappingABC[str, ProviderCapabilities] | None = None,
    extra_s1_mappings: Sequence[Mapping] = (),
) -> World:
    """Build the world; ``s-1`` and ``s-2`` are selected, ``s-3`` is in scope only."""
    s1 = make_scoped(
        make_source("s-1", max_queries_per_source=s1_max_queries),
        mappings=[m1 or rich_mapping(), *extra_s1_mappings],
    )
    s2 = make_scoped(make_source("s-2"))
    s3 = make_scoped(make_source("s-3"))
    scope = make_scope([s1, s2, s3], limits=limits or CapabilityLimits())
    selected: tuple[ScopedSource, ...] = (s1, s2)
    return World(
        ctx=make_context(claims=claims),
        selection=Selection(sources=selected),
        scope=scope,
        capabilities=(
            capabilities
            if capabilities is not None
            else {"s-1": ALL_CAPS, "s-2": ALL_CAPS, "s-3": ALL_CAPS}
        ),
    )


def keyword(source_id: str = "s-1", mapping_id: str | None = None, **kw: Any) -> PlannedQuery:
    """A valid keyword query for ``source_id`` unless ``kw`` says otherwise."""
    values: dict[str, Any] = {
        "source_id": source_id,
        "mapping_id": mapping_id or ("m-1" if source_id == "s-1" else f"m-{source_id}"),
        "strategy": "keyword",
        "optional_terms": ("alpha",),
    }
    values.update(kw)
    return PlannedQuery(**values)


def issue(planned: Sequence[PlannedQuery], world: World | None = None) -> list[ValidatedQuery]:
    """Validate ``planned`` (in the default world) and return the issued queries."""
    return list((world or make_world()).validate(planned).queries)


def with_record_filter(claim: str = "dept", operator: Operator = Operator.EQ) -> Mapping:
    """``m-1`` restricted to rows whose ``dept`` equals the caller's ``claim``."""
    return rich_mapping(
        record_filters=(RecordFilter(field="dept", claim=claim, operator=operator),)
    )
