"""The validator's individual rules: pure checks over one planned query's parts.

Each rule either returns the checked, resolved value or raises ``Violation`` with the
``RejectionReason`` the spec names. Every rule assumes its input is hostile: planned queries
come from a model, so types are re-checked here even where the annotations promise them.
Only ``esra.core._pipeline.validation`` turns what these rules return into a ``ValidatedQuery``.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping as MappingABC
from datetime import date

from esra.core._config.capability import CapabilityLimits
from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._config.record_filter_template import template_of
from esra.core._context import ClaimValue
from esra.core._pipeline.values import ProviderCapabilities, ValidatedQuery
from esra.core._query import PlannedFilter, ProjectedField, ResolvedFilter, Scalar, Strategy
from esra.core._record_predicate import (
    MissingClaimError,
    RecordPredicate,
    bind_template,
    coerce_claim,
    coerce_claim_set,
)
from esra.core.codes import RejectionReason

__all__ = [
    "MAX_IN_VALUES",
    "UNSAFE_SEQUENCES",
    "Violation",
    "check_content",
    "check_rendered_lengths",
    "check_scored_term_count",
    "check_term_count",
    "clean_terms",
    "contains_unsafe",
    "drop_unrenderable",
    "parse_strategy",
    "project",
    "resolve_filter",
    "resolve_limit",
    "resolve_record_filters",
    "resolve_record_predicate",
]

# Statement separators and comment introducers of every supported SQL dialect. Values only
# ever travel as bind parameters; rejecting these anyway keeps a future path that forgets
# that from being injectable, and stops a plan that looks like SQL from running at all.
UNSAFE_SEQUENCES: tuple[str, ...] = (";", "--", "/*", "*/", "#")
MAX_IN_VALUES = 50
# The widest integer every supported engine binds without overflow (signed 64-bit).
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
# Control characters, line/paragraph separators and lone surrogates (which no driver can
# encode). Format characters (Cf) stay allowed: joiners are part of ordinary text in many
# scripts.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


class Violation(Exception):  # noqa: N818 — a rule outcome, not an error that escapes
    """Raised by a rule to reject the query it is checking; never leaves the validator."""

    def __init__(self, reason: RejectionReason) -> None:
        self.reason = reason
        super().__init__(reason.value)


def contains_unsafe(text: str) -> bool:
    """Return whether ``text`` holds a separator, comment sequence or control character.

    The compatibility-normalised form is checked too, so full-width look-alikes (``；``,
    ``／＊``) that some collations fold to ASCII are refused as well.
    """
    if text.isascii():
        # Nearly every term. ASCII text is its own NFKC form, and its only unsafe category
        # is Cc (0x00-0x1F and 0x7F), exactly the ASCII characters ``isprintable`` refuses:
        # the same answer as the loop below without a per-character category lookup.
        return any(seq in text for seq in UNSAFE_SEQUENCES) or not text.isprintable()
    for candidate in (text, unicodedata.normalize("NFKC", text)):
        if any(seq in candidate for seq in UNSAFE_SEQUENCES):
            return True
        if any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in candidate):
            return True
    return False


def clean_terms(terms: object) -> tuple[str, ...]:
    """Return ``terms`` stripped, with blank ones dropped.

    Raises:
        Violation: UNSAFE_CONTENT if ``terms`` is not a sequence of strings.
    """
    if not isinstance(terms, tuple | list):
        raise Violation(RejectionReason.UNSAFE_CONTENT)
    cleaned: list[str] = []
    for term in terms:
        if not isinstance(term, str):
            raise Violation(RejectionReason.UNSAFE_CONTENT)
        stripped = term.strip()
        if stripped:
            cleaned.append(stripped)
    return tuple(cleaned)


def check_content(groups: tuple[tuple[str, ...], ...], limits: CapabilityLimits) -> None:
    """Check every term and phrase, as the plan wrote it, for unsafe content and length.

    Raises:
        Violation: UNSAFE_CONTENT or TERM_LIMIT_EXCEEDED.
    """
    items = [item for group in groups for item in group]
    if any(contains_unsafe(item) for item in items):
        raise Violation(RejectionReason.UNSAFE_CONTENT)
    if any(len(item) > limits.max_term_chars for item in items):
        raise Violation(RejectionReason.TERM_LIMIT_EXCEEDED)


def check_term_count(groups: tuple[tuple[str, ...], ...], limits: CapabilityLimits) -> None:
    """Check the number of terms and phrases the query will search for against the limit.

    Raises:
        Violation: TERM_LIMIT_EXCEEDED.
    """
    if sum(len(group) for group in groups) > limits.max_terms_per_query:
        raise Violation(RejectionReason.TERM_LIMIT_EXCEEDED)


def check_scored_term_count(scored: int, caps: ProviderCapabilities) -> None:
    """Hold the ``scored`` terms of a query (required terms, optional words and phrases, as
    issued) to the most its provider states one statement can score.

    Raises:
        Violation: TERM_LIMIT_EXCEEDED.
    """
    if caps.max_scored_terms is not None and scored > caps.max_scored_terms:
        raise Violation(RejectionReason.TERM_LIMIT_EXCEEDED)


def drop_unrenderable(
    required: tuple[str, ...],
    optional: tuple[str, ...],
    excluded: tuple[str, ...],
    phrases: tuple[str, ...],
    caps: ProviderCapabilities,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Return the terms without the optional and excluded ones the provider renders to nothing.

    Such a term sent anyway is an empty search condition, which an engine may refuse (SQL
    Server: error 7645). Dropping an optional one removes nothing a row could match and an
    excluded one nothing a row could be removed for, so no result changes. A required term
    or phrase cannot be dropped without widening the search beyond what was asked.

    Raises:
        Violation: EMPTY_QUERY if a required term or phrase renders to nothing.
    """
    rendering = caps.rendering
    if rendering is None:
        return required, optional, excluded, phrases
    if any(rendering.renders_empty(term) for term in (*required, *phrases)):
        raise Violation(RejectionReason.EMPTY_QUERY)
    optional = tuple(term for term in optional if not rendering.renders_empty(term))
    excluded = tuple(term for term in excluded if not rendering.renders_empty(term))
    return required, optional, excluded, phrases


def check_rendered_lengths(query: ValidatedQuery, caps: ProviderCapabilities) -> None:
    """Hold ``query``'s statement, as its provider renders it, to the provider's stated limits.

    Raises:
        Violation: TERM_LIMIT_EXCEEDED if a full-text search condition or the command text
            is longer than the engine accepts.
    """
    condition_limit = caps.max_text_condition_length
    command_limit = caps.max_command_length
    if caps.rendering is None or (condition_limit is None and command_limit is None):
        return
    lengths = caps.rendering.rendered_lengths(query)
    if lengths is None:
        return
    if condition_limit is not None and any(
        length > condition_limit for length in lengths.text_conditions
    ):
        raise Violation(RejectionReason.TERM_LIMIT_EXCEEDED)
    if command_limit is not None and lengths.command > command_limit:
        raise Violation(RejectionReason.TERM_LIMIT_EXCEEDED)


def parse_strategy(value: object, mapping: Mapping, caps: ProviderCapabilities) -> Strategy:
    """Return the strategy if it is one of the six, the provider supports it, and (for RECENT)
    the mapping has a freshness field.

    Raises:
        Violation: STRATEGY_UNSUPPORTED.
    """
    if not isinstance(value, str):
        raise Violation(RejectionReason.STRATEGY_UNSUPPORTED)
    try:
        strategy = Strategy(value)
    except ValueError:
        raise Violation(RejectionReason.STRATEGY_UNSUPPORTED) from None
    if strategy not in caps.strategies:
        raise Violation(RejectionReason.STRATEGY_UNSUPPORTED)
    if strategy is Strategy.RECENT and mapping.freshness_field is None:
        raise Violation(RejectionReason.STRATEGY_UNSUPPORTED)
    return strategy


def _returnable(mapping: Mapping, name: object) -> FieldSpec:
    spec = mapping.field(name) if isinstance(name, str) else None
    if spec is None:
        raise Violation(RejectionReason.UNKNOWN_FIELD)
    if not spec.is_returnable:
        raise Violation(RejectionReason.FIELD_NOT_RETURNABLE)
    if spec.is_restricted:
        raise Violation(RejectionReason.FIELD_RESTRICTED)
    return spec


def project(mapping: Mapping, requested: object) -> tuple[ProjectedField, ...]:
    """Return title, content and record-key fields + the requested ones (all returnable if none).

    Title and content fields are checked like requested ones, so the invariant holds even for
    a mapping built outside a consistency-checked snapshot.

    Raises:
        Violation: UNKNOWN_FIELD, FIELD_NOT_RETURNABLE or FIELD_RESTRICTED.
    """
    if not isinstance(requested, tuple | list):
        raise Violation(RejectionReason.UNKNOWN_FIELD)
    names: list[object] = [mapping.title_field, *mapping.content_fields]
    # The field holding the record key, when it may be returned: a result without it cannot
    # be told apart from another, whatever fields the plan asked for.
    keys = (spec.name for spec in mapping.returnable_fields() if spec.column == mapping.record_key)
    names.extend(keys)
    if requested:
        names.extend(requested)
    else:
        names.extend(spec.name for spec in mapping.returnable_fields())
    projection: list[ProjectedField] = []
    seen: set[str] = set()
    for name in names:
        spec = _returnable(mapping, name)
        if spec.name not in seen:
            seen.add(spec.name)
            projection.append(ProjectedField(name=spec.name, column=spec.column))
    return tuple(projection)


def _coerce(value: object, field_type: FieldType, limits: CapabilityLimits) -> Scalar:
    """Return ``value`` as the scalar ``field_type`` demands, or raise FILTER_VALUE_INVALID."""
    invalid = Violation(RejectionReason.FILTER_VALUE_INVALID)
    match field_type:
        case FieldType.TEXT:
            if not isinstance(value, str):
                raise invalid
            if contains_unsafe(value):
                raise Violation(RejectionReason.UNSAFE_CONTENT)
            if len(value) > limits.max_term_chars:
                raise invalid
            return value
        case FieldType.BOOLEAN:
            if not isinstance(value, bool):
                raise invalid
            return value
        case FieldType.INTEGER:
            if isinstance(value, float) and math.isfinite(value) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise invalid
            if not _INT_MIN <= value <= _INT_MAX:
                raise invalid
            return value
        case FieldType.NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise invalid
            if isinstance(value, float) and not math.isfinite(value):
                raise invalid
            if isinstance(value, int) and not _INT_MIN <= value <= _INT_MAX:
                raise invalid
            return value
        case FieldType.DATE:
            if not isinstance(value, str):
                raise invalid
            try:
                # The canonical form: whatever ISO spelling came in, one spelling goes out.
                return date.fromisoformat(value).isoformat()
            except ValueError:
                raise invalid from None
    raise invalid  # pragma: no cover — FieldType is closed


def resolve_filter(
    mapping: Mapping, planned: object, caps: ProviderCapabilities, limits: CapabilityLimits
) -> ResolvedFilter:
    """Resolve a planned filter to its column, checked operator and typed values.

    Raises:
        Violation: UNKNOWN_FIELD, FIELD_RESTRICTED, FIELD_NOT_RETURNABLE,
            FIELD_NOT_FILTERABLE, OPERATOR_NOT_PERMITTED, FILTER_VALUE_INVALID or
            UNSAFE_CONTENT.
    """
    if not isinstance(planned, PlannedFilter):
        raise Violation(RejectionReason.FILTER_VALUE_INVALID)
    spec = mapping.field(planned.field) if isinstance(planned.field, str) else None
    if spec is None:
        raise Violation(RejectionReason.UNKNOWN_FIELD)
    # A filter on a restricted or masked field would reveal its values through which rows
    # come back (Mapping.may_filter_on).
    if spec.is_restricted or mapping.is_masked(spec.name):
        raise Violation(RejectionReason.FIELD_RESTRICTED)
    if not mapping.may_filter_on(spec):
        raise Violation(RejectionReason.FIELD_NOT_FILTERABLE)
    # Nor on a field the response may not carry: it is as hidden as a restricted one (a
    # caller steering the planner would read it out as through a caller filter, which
    # refuses it for that reason), and no planning prompt names it.
    if not spec.is_returnable:
        raise Violation(RejectionReason.FIELD_NOT_RETURNABLE)
    operator = _parse_operator(planned.operator)
    if operator not in spec.allowed_operators or operator not in caps.operators:
        raise Violation(RejectionReason.OPERATOR_NOT_PERMITTED)
    raw = planned.value
    if operator is Operator.IN:
        if not isinstance(raw, tuple | list) or not 1 <= len(raw) <= MAX_IN_VALUES:
            raise Violation(RejectionReason.FILTER_VALUE_INVALID)
        values = tuple(_coerce(v, spec.type, limits) for v in raw)
    else:
        if isinstance(raw, tuple | list):
            raise Violation(RejectionReason.FILTER_VALUE_INVALID)
        values = (_coerce(raw, spec.type, limits),)
    return ResolvedFilter(column=spec.column, type=spec.type, operator=operator, values=values)


def _parse_operator(value: object) -> Operator:
    if not isinstance(value, str):
        raise Violation(RejectionReason.OPERATOR_NOT_PERMITTED)
    try:
        return Operator(value)
    except ValueError:
        raise Violation(RejectionReason.OPERATOR_NOT_PERMITTED) from None


def resolve_limit(
    limit: object, mapping: Mapping, limits: CapabilityLimits, caps: ProviderCapabilities
) -> int:
    """Return the row limit: the planner's, or the mapping default bounded by policy.

    Raises:
        Violation: LIMIT_OUT_OF_POLICY when the planner's limit is outside
            ``1..min(max_rows_per_query, provider max_rows)``.
    """
    ceiling = min(limits.max_rows_per_query, caps.max_rows)
    if limit is None:
        # The planner asked for nothing in particular: the default, never beyond policy.
        limit = min(mapping.default_template.limit, ceiling)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= ceiling:
        raise Violation(RejectionReason.LIMIT_OUT_OF_POLICY)
    return limit


def resolve_record_filters(
    mapping: Mapping, claims: MappingABC[str, ClaimValue]
) -> tuple[ResolvedFilter, ...] | None:
    """Bind each of the mapping's record filters to the caller's claim value.

    A tuple claim becomes an IN predicate. Returns ``None`` (the source must be dropped) when
    a claim is missing, empty, or cannot be bound to the field's type and operator: record
    security fails closed and is never defaulted or omitted. Claims are checked and coerced
    by the record-filter template's own check (``coerce_claim``), so an empty value, a set
    holding one, or text with control or zero-width characters drops the source here exactly
    as it does for a template.
    """
    resolved: list[ResolvedFilter] = []
    for record_filter in mapping.record_filters:
        spec = mapping.field(record_filter.field)
        if spec is None:
            return None
        claim = claims.get(record_filter.claim)
        operator = record_filter.operator
        try:
            if isinstance(claim, tuple):
                # A set of values can only mean membership; an ordering or inequality operator
                # has no single value to compare with.
                if operator not in (Operator.EQ, Operator.IN):
                    return None
                operator, values = Operator.IN, coerce_claim_set(claim, spec.type)
            else:
                values = (coerce_claim(claim, spec.type),)
        except MissingClaimError:
            return None
        resolved.append(
            ResolvedFilter(column=spec.column, type=spec.type, operator=operator, values=values)
        )
    return tuple(resolved)


def resolve_record_predicate(
    mapping: Mapping, claims: MappingABC[str, ClaimValue]
) -> RecordPredicate | None:
    """Bind the mapping's record-filter template to the caller's claims.

    Returns ``None`` when the mapping has no template.

    Raises:
        MissingClaimError: a placeholder's claim is missing, empty or does not fit its field;
            the source must be dropped (fail closed, never defaulted or omitted).
        ConfigurationError: the template is invalid, which only a mapping built outside a
            ``ConfigSnapshot`` can be.
    """
    template = template_of(mapping)
    if template is None:
        return None
    return bind_template(template, mapping, claims)
