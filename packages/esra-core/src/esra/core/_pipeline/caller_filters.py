"""Caller filters: conditions the caller asks for, ANDed into every planned search.

A caller (through the tool's ``filters`` argument) may narrow a search on business fields —
``{"field": "region", "operator": "eq", "value": "emea"}`` — but only on the fields it may
filter on: a field of a mapping of a source in its scope (source policy, binding, exposure
subset, runtime authorization, and the record-level claims that source demands), that is
filterable, returnable and not restricted, with an operator both the field and the source's
engine permit (``caller_filter_fields``). Hosts publish exactly that set in the tool's input
schema.

A filter naming any other field — restricted, not returnable, not filterable, of a source
outside the caller's scope, or simply unknown — is ``ESRA_INVALID_REQUEST`` with one fixed
message listing the allowed fields (``check_caller_filters``). The message never echoes the
requested name, so the bytes are the same whether the field is restricted or does not exist:
the refusal is no oracle for what the configuration holds beyond the caller's scope. An
operator the field does not allow, or a value of the wrong shape or type, is likewise refused
before any model call, naming what is allowed.

A checked filter gains no path around the validator: it is appended to every planned query
whose mapping can apply it, so the validator still checks it like any other (defence in
depth) and binds its value as a parameter. A mapping that cannot apply one of the filters —
it lacks the field, or has it restricted, hidden or without that operator — is not run, and
its source carries ``ESRA_CALLER_FILTER_UNSUPPORTED``: running it unfiltered would return
what the caller asked to exclude, and the warning reads the same whichever the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from datetime import date

import attrs

from esra.core._audit.record import AuditRecord
from esra.core._clock import SystemClock
from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._context import ClaimValue, InvocationContext
from esra.core._pipeline import _validation_rules as rules
from esra.core._pipeline.invocation import Invocation
from esra.core._pipeline.scope import EffectiveScope, ScopedSource, resolve_scope
from esra.core._pipeline.validation import context_claims
from esra.core._query import PlannedFilter, PlannedQuery
from esra.core._record_predicate import MissingClaimError
from esra.core._response import ResponseWarning
from esra.core.codes import WarningCode
from esra.core.exceptions import (
    ConfigurationError,
    ExposureNotFoundError,
    InvalidRequestError,
    NoSourcesAvailableError,
)
from esra.core.ports import ProviderCapabilities

__all__ = [
    "MAX_CALLER_FILTERS",
    "CallerFilterField",
    "CallerFiltering",
    "apply_caller_filters",
    "caller_filter_fields",
    "check_caller_filters",
    "filters_digest",
    "listed_filter_fields",
]

# Far above what a search needs; each filter is one more predicate on every query.
MAX_CALLER_FILTERS = 8

_VALUE_KINDS = {
    FieldType.TEXT: "text",
    FieldType.DATE: "a date (YYYY-MM-DD)",
    FieldType.INTEGER: "an integer",
    FieldType.NUMBER: "a number",
    FieldType.BOOLEAN: "true or false",
}


@attrs.frozen
class CallerFilterField:
    """A business field this caller may filter on, merged over every mapping that has it.

    ``operators`` and ``types`` are the union over those mappings, in their enums' order: a
    mapping that lacks the operator cannot apply the filter and is not searched
    (``apply_caller_filters``).
    """

    name: str
    operators: tuple[Operator, ...]
    types: tuple[FieldType, ...]
    description: str = ""


@attrs.frozen
class CallerFiltering:
    """The planned queries with the caller's filters added, and the sources left out."""

    queries: tuple[PlannedQuery, ...]
    warnings: tuple[ResponseWarning, ...] = ()


def caller_filter_fields(
    ctx: InvocationContext,
    sources: Sequence[ScopedSource],
    capabilities: MappingABC[str, ProviderCapabilities],
) -> tuple[CallerFilterField, ...]:
    """The fields the caller in ``ctx`` may filter on across ``sources``, sorted by name.

    A source is skipped when its engine states no capabilities (the validator would refuse
    every query on it) or when the caller lacks a claim its record-level security needs (the
    validator drops it): neither could ever apply a filter for this caller.
    """
    operators: dict[str, set[Operator]] = {}
    types: dict[str, set[FieldType]] = {}
    descriptions: dict[str, str] = {}
    claims = context_claims(ctx)
    for scoped in sources:
        caps = capabilities.get(scoped.source.id)
        if caps is None or not _claims_admit(scoped, claims):
            continue
        for mapping in scoped.mappings:
            for spec in mapping.fields:
                allowed = _operators(mapping, spec, caps)
                if not allowed:
                    continue
                operators.setdefault(spec.name, set()).update(allowed)
                types.setdefault(spec.name, set()).add(spec.type)
                if spec.description and spec.name not in descriptions:
                    descriptions[spec.name] = spec.description
    return tuple(
        CallerFilterField(
            name=name,
            operators=tuple(op for op in Operator if op in operators[name]),
            types=tuple(t for t in FieldType if t in types[name]),
            description=descriptions.get(name, ""),
        )
        for name in sorted(operators)
    )


async def listed_filter_fields(
    ctx: InvocationContext,
    snapshot: ConfigSnapshot,
    capabilities: MappingABC[str, ProviderCapabilities],
) -> tuple[CallerFilterField, ...]:
    """The fields to publish in the tool schema of ``ctx``'s exposure, for ``ctx``'s caller.

    The scope is resolved by ``resolve_scope`` itself, so the schema can never name a field
    of a source the caller could not search; sources count with their configured health, not
    a live probe, so the list does not change with every outage. Listing tools is not an
    invocation: that resolution is not audited.
    """
    # The trail is never written: what resolution notes is dropped with it.
    unaudited = Invocation.start(ctx, clock=SystemClock(), audit=_Unaudited())
    try:
        scope = await resolve_scope(unaudited, snapshot, health={})
    except (ConfigurationError, ExposureNotFoundError, NoSourcesAvailableError):
        # A tool its levels leave nothing to serve lists no filters; calling it fails closed.
        return ()
    return caller_filter_fields(ctx, scope.sources, capabilities)


def check_caller_filters(
    filters: Sequence[PlannedFilter], allowed: Sequence[CallerFilterField]
) -> None:
    """Refuse any filter that names a field outside ``allowed`` or misuses an allowed one.

    Raises:
        InvalidRequestError: a field not allowed (one message for every such field, naming
            the allowed ones), an operator the field does not take, or a value of the wrong
            shape or type.
    """
    by_name = {f.name: f for f in allowed}
    for planned in filters:
        field = by_name.get(planned.field) if isinstance(planned.field, str) else None
        if field is None:
            # Never the requested name: a restricted field and a missing one read the same.
            raise InvalidRequestError(_fields_message(allowed))
        if planned.operator not in field.operators:
            ops = ", ".join(op.value for op in field.operators)
            msg = f"A filter on {field.name} may use only these operators: {ops}."
            raise InvalidRequestError(msg)
        values = _values(planned)
        listed = isinstance(planned.value, tuple | list)
        if listed != (planned.operator == Operator.IN):
            msg = (
                "A filter with the in operator takes a list of values; "
                "any other operator takes one value."
            )
            raise InvalidRequestError(msg)
        if not all(any(_fits(v, t) for t in field.types) for v in values):
            kinds = " or ".join(_VALUE_KINDS[t] for t in field.types)
            msg = f"A filter on {field.name} takes {kinds}."
            raise InvalidRequestError(msg)


def apply_caller_filters(
    queries: Sequence[PlannedQuery],
    filters: Sequence[PlannedFilter],
    *,
    scope: EffectiveScope,
    source_names: dict[str, str],
    capabilities: MappingABC[str, ProviderCapabilities],
) -> CallerFiltering:
    """Add ``filters`` to each query whose mapping can apply every one; drop the others.

    A query naming a mapping outside the scope is passed on unchanged: the validator rejects
    it for that reason, which is the more precise one.
    """
    if not filters:
        return CallerFiltering(queries=tuple(queries))
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
        caps = capabilities.get(query.source_id)
        if caps is not None and all(_applies(mapping, f, caps) for f in filters):
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


def _operators(
    mapping: Mapping, spec: FieldSpec, caps: ProviderCapabilities
) -> frozenset[Operator]:
    """What a caller may filter ``spec`` with: nothing unless the mapping allows filtering on
    it (filterable, neither restricted nor masked) and returns it.

    A field that may not be returned is as hidden as a restricted or masked one: which rows
    come back under a filter on it would reveal its values.
    """
    if not spec.is_returnable or not mapping.may_filter_on(spec):
        return frozenset()
    return spec.allowed_operators & caps.operators


def _applies(mapping: Mapping, planned: PlannedFilter, caps: ProviderCapabilities) -> bool:
    spec = mapping.field(planned.field)
    return spec is not None and planned.operator in _operators(mapping, spec, caps)


def _claims_admit(scoped: ScopedSource, claims: MappingABC[str, ClaimValue]) -> bool:
    """Whether the caller holds every claim the source's record-level security binds.

    The validator's own rule (``validation._bind_record_filters``): one mapping that cannot
    be bound drops the whole source.
    """
    for mapping in scoped.mappings:
        if rules.resolve_record_filters(mapping, claims) is None:
            return False
        try:
            rules.resolve_record_predicate(mapping, claims)
        except MissingClaimError:
            return False
    return True


def _fits(value: object, field_type: FieldType) -> bool:
    """Whether ``value`` has the JSON kind ``field_type`` takes (the validator re-checks)."""
    match field_type:
        case FieldType.TEXT:
            return isinstance(value, str)
        case FieldType.DATE:
            if not isinstance(value, str):
                return False
            try:
                date.fromisoformat(value)
            except ValueError:
                return False
            return True
        case FieldType.BOOLEAN:
            return isinstance(value, bool)
        case FieldType.INTEGER:
            if isinstance(value, float):
                return math.isfinite(value) and value.is_integer()
            return isinstance(value, int) and not isinstance(value, bool)
        case FieldType.NUMBER:
            if isinstance(value, float):
                return math.isfinite(value)
            return isinstance(value, int) and not isinstance(value, bool)


def _fields_message(allowed: Sequence[CallerFilterField]) -> str:
    if not allowed:
        return "This tool takes no filters."
    names = ", ".join(f.name for f in allowed)
    return f"A filter may name only these fields: {names}."


class _Unaudited:
    """An audit sink that keeps nothing: for scope resolution outside an invocation."""

    async def record(self, record: AuditRecord) -> None:
        """Discard ``record``."""
        del record
