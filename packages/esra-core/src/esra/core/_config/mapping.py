"""Mapping: how one relation of a source is searched, projected and masked."""

from __future__ import annotations

from enum import StrEnum

import attrs

__all__ = [
    "DefaultTemplate",
    "FieldSpec",
    "FieldType",
    "Mapping",
    "MaskingKind",
    "MaskingRule",
    "Operator",
    "RecordFilter",
]


class Operator(StrEnum):
    """Structured-filter operators a field may allow."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LTE = "lte"
    GT = "gt"
    GTE = "gte"
    IN = "in"


class FieldType(StrEnum):
    """The value type a filter on this field must carry."""

    TEXT = "text"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    DATE = "date"


@attrs.frozen
class FieldSpec:
    """One business field. ``column`` is physical and never leaves the core."""

    name: str
    column: str
    type: FieldType = FieldType.TEXT
    is_searchable: bool = False
    is_filterable: bool = False
    is_returnable: bool = False
    is_restricted: bool = False
    allowed_operators: frozenset[Operator] = frozenset()
    description: str = ""


class MaskingKind(StrEnum):
    """How a returned value is masked at response assembly."""

    FULL = "full"
    LAST4 = "last4"
    EMAIL = "email"


@attrs.frozen
class MaskingRule:
    """Mask ``field`` with ``kind`` in every response."""

    field: str
    kind: MaskingKind = MaskingKind.FULL


@attrs.frozen
class RecordFilter:
    """A record-level predicate: ``field operator <caller claim value>``.

    Applied in the executed query as a bind parameter. A caller without the claim never has
    the source searched: the predicate is never omitted and never defaulted.
    """

    field: str
    claim: str
    operator: Operator = Operator.EQ


@attrs.frozen
class DefaultTemplate:
    """The planning fallback: a phrase query over the prompt plus a keyword query."""

    limit: int = 10
    fields: tuple[str, ...] = ()


@attrs.frozen(cache_hash=True)
class Mapping:
    """A searchable relation of a source, expressed as a business schema.

    ``relation``, ``schema``, ``text_index``, ``record_key`` and ``part_order_column`` are
    physical and never leave the core; the model plans against ``business_name``,
    ``description`` and ``fields``.

    ``record_filter_template`` is a record-level predicate over business fields with
    ``{claim:NAME}`` placeholders (``esra.core._config.record_filter_template``), combined with
    ``record_filters`` by AND. Like them it is never sent to a model and fails closed.

    ``part_order_column`` is set when several rows share a record key as ordered parts of one
    record (the document store's segments): a search returns the best-matching part, and a
    document fetch joins every part in this column's order.
    """

    id: str
    tenant_id: str
    source_id: str
    business_name: str
    description: str
    relation: str
    record_key: str
    title_field: str
    content_fields: tuple[str, ...]
    fields: tuple[FieldSpec, ...]
    schema: str | None = None
    text_index: str | None = None
    masking: tuple[MaskingRule, ...] = ()
    record_filters: tuple[RecordFilter, ...] = ()
    record_filter_template: str | None = None
    freshness_field: str | None = None
    default_template: DefaultTemplate = DefaultTemplate()
    part_order_column: str | None = None

    def field(self, name: str) -> FieldSpec | None:
        """Return the business field called ``name``, if the mapping has one."""
        for spec in self.fields:
            if spec.name == name:
                return spec
        return None

    def returnable_fields(self) -> tuple[FieldSpec, ...]:
        """Fields that may appear in a response: returnable and not restricted."""
        return tuple(f for f in self.fields if f.is_returnable and not f.is_restricted)

    def model_visible_fields(self) -> tuple[FieldSpec, ...]:
        """Fields a planning prompt may name: the returnable allowlist (spec 003 never sends a
        model a restricted field or any field outside that allowlist)."""
        return self.returnable_fields()

    def is_masked(self, name: str) -> bool:
        """Whether a masking rule hides the value of the field ``name``."""
        return any(rule.field == name for rule in self.masking)

    def may_filter_on(self, spec: FieldSpec) -> bool:
        """Whether a filter on ``spec`` is allowed: filterable, and hiding nothing.

        A filter reveals a field's value through which rows come back — a range filter
        bisects a number in a few dozen calls, ``eq``/``in`` confirm guesses — so a field
        whose value is hidden, restricted or masked, is never filtered on, whatever its
        ``is_filterable`` says.
        """
        return spec.is_filterable and not spec.is_restricted and not self.is_masked(spec.name)
