"""Stage 4: the validator, which alone issues ``ValidatedQuery`` objects.

A provider executes nothing but a ``ValidatedQuery`` the validator issued (the sealed type and
its ``ensure_validated`` check live in ``esra.core._pipeline.values``, which the ports import).

``validate`` is stage 4 of the pipeline: deterministic, pure and synchronous. It applies every
rule of spec 000 §4 and 003 (the rules themselves live in ``_validation_rules`` beside it),
binds record filters to the caller's claims (failing closed), holds each query to the limits
its provider states (measured by the provider's own rendering), enforces the query caps, and
issues one ``ValidatedQuery`` per surviving plan. It never raises for a bad plan: a plan is
either issued or rejected with a reason code.
"""

from __future__ import annotations

from collections.abc import Mapping as MappingABC
from collections.abc import Sequence
from typing import Any

import attrs

from esra.core._config.mapping import Mapping
from esra.core._context import ClaimValue, InvocationContext
from esra.core._pipeline import _validation_rules as rules
from esra.core._pipeline.optional_words import optional_words
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core._pipeline.selection import Selection
from esra.core._pipeline.values import ProviderCapabilities, ValidatedQuery, _issue
from esra.core._query import PlannedQuery, ProjectedField, ResolvedFilter, Strategy
from esra.core._record_predicate import MissingClaimError, RecordPredicate
from esra.core._response import ResponseWarning
from esra.core.codes import RejectionReason, WarningCode

__all__ = [
    "MAX_LOOKUP_PARTS",
    "MAX_RECORD_KEY_CHARS",
    "TENANT_CLAIM",
    "Rejection",
    "ValidationOutcome",
    "context_claims",
    "validate",
    "validate_lookup",
]


@attrs.frozen
class Rejection:
    """A planned query the validator dropped, and the rule it failed (audited by the caller)."""

    source_id: str
    mapping_id: str
    reason: RejectionReason


@attrs.frozen
class ValidationOutcome:
    """What validation let through, what it rejected, and which sources it dropped.

    ``dropped_sources`` are sources removed because the caller lacks a claim a record filter
    needs; none of their queries was validated or issued.
    """

    queries: tuple[ValidatedQuery, ...]
    rejections: tuple[Rejection, ...] = ()
    dropped_sources: tuple[str, ...] = ()
    warnings: tuple[ResponseWarning, ...] = ()


def validate(
    planned: Sequence[PlannedQuery],
    *,
    ctx: InvocationContext,
    selection: Selection,
    scope: EffectiveScope,
    capabilities: MappingABC[str, ProviderCapabilities],
) -> ValidationOutcome:
    """Validate planned queries and issue a ``ValidatedQuery`` for each one that passes.

    Queries are checked in the order given; the per-source cap
    (``source.max_queries_per_source``) and the total cap (``limits.max_total_queries``)
    count only queries that passed every other rule, so a rejected plan never uses up a slot.
    ``query_id`` is ``{source_id}#{n}``, numbering each source's issued queries from 1.
    """
    selected = {
        s.source.id: s
        for s in selection.sources
        if scope.by_id(s.source.id) is not None and s.source.tenant_id == ctx.tenant_id
    }
    record_filters, predicates, dropped = _bind_record_filters(selected, ctx)
    issued: list[ValidatedQuery] = []
    rejections: list[Rejection] = []
    per_source: dict[str, int] = {}
    for query in planned:
        source_id = getattr(query, "source_id", None)
        mapping_id = getattr(query, "mapping_id", None)
        source_id = source_id if isinstance(source_id, str) else ""
        mapping_id = mapping_id if isinstance(mapping_id, str) else ""
        if source_id in dropped:
            continue
        try:
            values = _check(query, selected.get(source_id), ctx, scope, capabilities)
            count = per_source.get(source_id, 0)
            mapping: Mapping = values["mapping"]
            candidate = _issue(
                query_id=f"{source_id}#{count + 1}",
                source_id=source_id,
                record_filters=record_filters[mapping.id],
                record_predicate=predicates[mapping.id],
                **values,
            )
            # Measured on the query as issued: record filters and the bound template are part
            # of the statement the engine receives. A candidate rejected here has been shown
            # only to its provider's measure, never executed, and simply goes out of scope.
            rules.check_rendered_lengths(candidate, capabilities[source_id])
            if (
                count >= selected[source_id].source.max_queries_per_source
                or len(issued) >= scope.limits.max_total_queries
            ):
                raise rules.Violation(RejectionReason.QUERY_CAP_EXCEEDED)
        except rules.Violation as violation:
            rejections.append(Rejection(source_id, mapping_id, violation.reason))
            continue
        per_source[source_id] = count + 1
        issued.append(candidate)
    warnings = [
        _dropped_warning(selected[source_id]) for source_id in selected if source_id in dropped
    ]
    warnings.extend(_rejection_warnings(rejections, scope))
    return ValidationOutcome(
        queries=tuple(issued),
        rejections=tuple(rejections),
        dropped_sources=tuple(s for s in selected if s in dropped),
        warnings=tuple(warnings),
    )


# A fetch reads every part of a multi-part record (the store's segments) to report an exact
# total; this bounds what one lookup may read. It covers the store's default segment ceiling
# (``esra.core._docstore.segments.DEFAULT_MAX_SEGMENTS``), so every store document is fetched
# whole; a store document's text is bounded by ``ExtractionLimits.max_chars`` however many
# segments it has.
MAX_LOOKUP_PARTS = 50_000
MAX_RECORD_KEY_CHARS = 512


def validate_lookup(
    ctx: InvocationContext, scoped: ScopedSource, *, mapping_id: str, record_key: str
) -> ValidatedQuery | None:
    """Issue the query that reads one record in full, for ``esra_{slug}_fetch``.

    The rules of a search, minus search content: the mapping must belong to the scoped source
    and the caller's tenant; the projection is every returnable, unrestricted field; and the
    record filters are bound to the *current* caller's claims, so a caller who lacks one gets
    ``None`` — exactly as if the record did not exist. The key travels as a bind parameter.
    """
    mapping = next((m for m in scoped.mappings if m.id == mapping_id), None)
    if (
        mapping is None
        or mapping.source_id != scoped.source.id
        or mapping.tenant_id != ctx.tenant_id
        or scoped.source.tenant_id != ctx.tenant_id
        or not 0 < len(record_key) <= MAX_RECORD_KEY_CHARS
    ):
        return None
    record_filters, predicates, dropped = _bind_record_filters({scoped.source.id: scoped}, ctx)
    if dropped:
        return None
    return _issue(
        query_id=f"{scoped.source.id}#fetch",
        source_id=scoped.source.id,
        lookup_key=record_key,
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=(),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=record_filters[mapping.id],
        record_predicate=predicates[mapping.id],
        projection=rules.project(mapping, ()),
        freshness=None,
        # One part more than a fetch uses, so the fetch can tell a record of exactly the cap
        # (complete) from a longer one.
        row_limit=MAX_LOOKUP_PARTS + 1 if mapping.part_order_column else 1,
    )


TENANT_CLAIM = "esra.tenant_id"


def context_claims(ctx: InvocationContext) -> dict[str, ClaimValue]:
    """The claims record filters may use: the caller's, plus reserved ``esra.*`` ones.

    ``esra.tenant_id`` is the invocation's tenant, taken from the context and overriding any
    caller claim of that name, so a mapping can put tenant isolation in the query itself (the
    document store does) without trusting anything the caller sent.
    """
    claims = {k: v for k, v in ctx.caller.claims.items() if not k.startswith("esra.")}
    claims[TENANT_CLAIM] = ctx.tenant_id
    return claims


def _bind_record_filters(
    selected: MappingABC[str, ScopedSource], ctx: InvocationContext
) -> tuple[dict[str, tuple[ResolvedFilter, ...]], dict[str, RecordPredicate | None], set[str]]:
    """Resolve every selected mapping's record filters and record-filter template.

    Returns the structured filters and the bound template of each mapping by id, and the
    sources dropped because a claim either one needs is missing, empty or unusable. The whole
    source goes, not just the mapping: the spec drops the source, and a caller without the
    claim must not have any of it searched.
    """
    bound: dict[str, tuple[ResolvedFilter, ...]] = {}
    predicates: dict[str, RecordPredicate | None] = {}
    dropped: set[str] = set()
    claims = context_claims(ctx)
    for source_id, scoped in selected.items():
        for mapping in scoped.mappings:
            resolved = rules.resolve_record_filters(mapping, claims)
            try:
                predicate = rules.resolve_record_predicate(mapping, claims)
            except MissingClaimError:
                resolved = None
            if resolved is None:
                dropped.add(source_id)
                break
            bound[mapping.id] = resolved
            predicates[mapping.id] = predicate
    return bound, predicates, dropped


def _check(
    query: PlannedQuery,
    scoped: ScopedSource | None,
    ctx: InvocationContext,
    scope: EffectiveScope,
    capabilities: MappingABC[str, ProviderCapabilities],
) -> dict[str, Any]:
    """Apply every per-query rule in the spec's order; return the issued query's values."""
    if not isinstance(query, PlannedQuery) or scoped is None:
        raise rules.Violation(RejectionReason.MAPPING_NOT_IN_SCOPE)
    mapping = next((m for m in scoped.mappings if m.id == query.mapping_id), None)
    if (
        mapping is None
        or mapping.source_id != scoped.source.id
        or mapping.tenant_id != ctx.tenant_id
    ):
        raise rules.Violation(RejectionReason.MAPPING_NOT_IN_SCOPE)
    caps = capabilities.get(scoped.source.id)
    if caps is None:
        # No provider stated what it supports: nothing can be shown to be supported.
        raise rules.Violation(RejectionReason.STRATEGY_UNSUPPORTED)
    strategy = rules.parse_strategy(query.strategy, mapping, caps)
    projection = rules.project(mapping, query.fields)
    if not isinstance(query.filters, tuple | list):
        raise rules.Violation(RejectionReason.FILTER_VALUE_INVALID)
    limits = scope.limits
    filters = tuple(rules.resolve_filter(mapping, f, caps, limits) for f in query.filters)
    row_limit = rules.resolve_limit(query.limit, mapping, limits, caps)
    required = rules.clean_terms(query.required_terms)
    optional = rules.clean_terms(query.optional_terms)
    excluded = rules.clean_terms(query.excluded_terms)
    phrases = rules.clean_terms(query.phrases)
    # Checked as written (splitting on whitespace would hide a line break or other control
    # character), then counted as the words the providers will search for.
    rules.check_content((required, optional, excluded, phrases), limits)
    optional = optional_words(optional)
    rules.check_term_count((required, optional, excluded, phrases), limits)
    required, optional, excluded, phrases = rules.drop_unrenderable(
        required, optional, excluded, phrases, caps
    )
    rules.check_scored_term_count(len(required) + len(optional) + len(phrases), caps)
    # Excluded terms alone describe nothing to find; only RECENT may run without content.
    if not (required or optional or phrases) and strategy is not Strategy.RECENT:
        raise rules.Violation(RejectionReason.EMPTY_QUERY)
    freshness_spec = mapping.field(mapping.freshness_field) if mapping.freshness_field else None
    return {
        "mapping": mapping,
        "strategy": strategy,
        "required_terms": required,
        "optional_terms": optional,
        "excluded_terms": excluded,
        "phrases": phrases,
        "filters": filters,
        "projection": projection,
        "freshness": (
            ProjectedField(name=freshness_spec.name, column=freshness_spec.column)
            if freshness_spec
            else None
        ),
        "row_limit": row_limit,
    }


def _dropped_warning(scoped: ScopedSource) -> ResponseWarning:
    # Neither the claim's name nor any value: only that an attribute was missing.
    return ResponseWarning(
        WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM,
        f"Source '{scoped.source.name}' was not searched: "
        "the caller lacks an attribute its record-level security requires.",
    )


# What a response may say about a field a plan named: whether it is restricted, hidden or
# not filterable would tell a caller (who can steer the planner through the prompt) that a
# field of that name exists, so all of them read as unknown. The audit keeps the precise one.
_PUBLIC_REASON = {
    RejectionReason.FIELD_NOT_RETURNABLE: RejectionReason.UNKNOWN_FIELD,
    RejectionReason.FIELD_RESTRICTED: RejectionReason.UNKNOWN_FIELD,
    RejectionReason.FIELD_NOT_FILTERABLE: RejectionReason.UNKNOWN_FIELD,
}


def _rejection_warnings(
    rejections: Sequence[Rejection], scope: EffectiveScope
) -> list[ResponseWarning]:
    """One ESRA_PLAN_REJECTED warning per source, in order of first rejection."""
    by_source: dict[str, list[RejectionReason]] = {}
    for rejection in rejections:
        by_source.setdefault(rejection.source_id, []).append(rejection.reason)
    warnings = []
    for source_id, reasons in by_source.items():
        scoped = scope.by_id(source_id)
        # A source outside the scope is never named, not even by the id a planner wrote.
        label = f"source '{scoped.source.name}'" if scoped else "a source outside the scope"
        codes = ", ".join(sorted({_PUBLIC_REASON.get(r, r).value for r in reasons}))
        noun = "query" if len(reasons) == 1 else "queries"
        warnings.append(
            ResponseWarning(
                WarningCode.ESRA_PLAN_REJECTED,
                f"{len(reasons)} planned {noun} for {label} rejected: {codes}.",
            )
        )
    return warnings
