"""Tests for the validator (stage 4) and the sealed ValidatedQuery it alone issues."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import attrs
import pytest

from esra.core._config.mapping import DefaultTemplate
from esra.core._pipeline.validation import Rejection
from esra.core._pipeline.values import ValidatedQuery, ensure_validated
from esra.core._query import PlannedFilter, PlannedQuery, ProjectedField, ResolvedFilter, Strategy
from esra.core.codes import RejectionReason, WarningCode
from esra.core.config import CapabilityLimits, FieldType, Operator
from esra.core.exceptions import UnvalidatedQueryError
from esra.core.ports import ProviderCapabilities, TextIndexKind
from esra.core.testing import InMemorySearchProvider
from tests.core._validation_fixtures import (
    ALL_CAPS,
    issue,
    keyword,
    make_world,
    rich_mapping,
    with_record_filter,
)
from tests.core.factories import make_mapping

ROWS = {
    "m-1": [
        {"col_id": 1, "col_title": "Alpha plan", "col_body": "alpha budget", "col_dept": "sales"},
        {"col_id": 2, "col_title": "Beta", "col_body": "beta only", "col_dept": "ops"},
    ]
}


def _one() -> ValidatedQuery:
    queries = issue([keyword()])
    assert len(queries) == 1
    return queries[0]


def _reasons(planned: list[PlannedQuery], **world: Any) -> list[RejectionReason]:
    return [r.reason for r in make_world(**world).validate(planned).rejections]


# --- the seal -----------------------------------------------------------------------------


def test_constructor_refuses_a_forged_seal() -> None:
    """ValidatedQuery cannot be built without the validator's private seal."""
    with pytest.raises(UnvalidatedQueryError):
        ValidatedQuery(object(), query_id="s-1#1", source_id="s-1")


def test_issued_query_passes_ensure_validated() -> None:
    """A query the validator issued is accepted as-is."""
    query = _one()
    assert ensure_validated(query) is query


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy, pickle.dumps])
def test_copy_and_pickle_are_refused(copier: Any) -> None:
    """Copying or pickling an issued query raises, so no unissued twin can exist."""
    with pytest.raises(TypeError):
        copier(_one())


def test_attrs_evolve_is_refused() -> None:
    """An attrs-style rebuild of an issued query is impossible (it is not an attrs class)."""
    with pytest.raises(attrs.exceptions.NotAnAttrsClassError):
        attrs.evolve(_one(), row_limit=10_000)  # type: ignore[misc]


def test_slot_by_slot_rebuild_is_refused() -> None:
    """An object rebuilt field by field around the constructor is refused by ensure_validated."""
    original = _one()
    forged = ValidatedQuery.__new__(ValidatedQuery)
    for name in ValidatedQuery.__slots__:
        if name != "__weakref__":
            object.__setattr__(forged, name, getattr(original, name))
    with pytest.raises(UnvalidatedQueryError):
        ensure_validated(forged)


def test_subclass_bypassing_init_is_refused() -> None:
    """A subclass that skips the sealed constructor is still refused."""

    class Sneaky(ValidatedQuery):
        __slots__ = ()

        def __init__(self) -> None:
            pass

    with pytest.raises(UnvalidatedQueryError):
        ensure_validated(Sneaky())


def test_planned_query_is_refused() -> None:
    """An unvalidated PlannedQuery is not a ValidatedQuery."""
    with pytest.raises(UnvalidatedQueryError):
        ensure_validated(keyword())


def test_issued_query_is_immutable() -> None:
    """Attributes of an issued query cannot be reassigned after validation."""
    query = _one()
    with pytest.raises(AttributeError):
        query.row_limit = 10_000
    assert query.row_limit == 10


async def test_in_memory_provider_refuses_a_forged_query() -> None:
    """InMemorySearchProvider raises on a forged query and records no execution."""
    provider = InMemorySearchProvider(ROWS)
    forged = ValidatedQuery.__new__(ValidatedQuery)
    with pytest.raises(UnvalidatedQueryError):
        await provider.execute(forged, timeout_s=1.0)
    with pytest.raises(UnvalidatedQueryError):
        await provider.execute(keyword(), timeout_s=1.0)  # type: ignore[arg-type]
    assert provider.executed == []


async def test_in_memory_provider_runs_an_issued_query() -> None:
    """An issued query runs and returns the projected business values."""
    provider = InMemorySearchProvider(ROWS)
    rows = await provider.execute(_one(), timeout_s=1.0)
    assert [r.key for r in rows] == ["1"]
    assert rows[0].values["title"] == "Alpha plan"


# --- one test per rejection reason --------------------------------------------------------

_REASON_CASES: list[tuple[RejectionReason, PlannedQuery]] = [
    (RejectionReason.MAPPING_NOT_IN_SCOPE, keyword("s-3")),
    (RejectionReason.UNKNOWN_FIELD, keyword(fields=("nope",))),
    (RejectionReason.FIELD_NOT_RETURNABLE, keyword(fields=("internal_notes",))),
    (RejectionReason.FIELD_RESTRICTED, keyword(fields=("salary",))),
    (RejectionReason.FIELD_NOT_FILTERABLE, keyword(filters=(PlannedFilter("body", "eq", "x"),))),
    (
        RejectionReason.OPERATOR_NOT_PERMITTED,
        keyword(filters=(PlannedFilter("status", "lt", "x"),)),
    ),
    (
        RejectionReason.FILTER_VALUE_INVALID,
        keyword(filters=(PlannedFilter("year", "eq", "nineteen"),)),
    ),
    (RejectionReason.LIMIT_OUT_OF_POLICY, keyword(limit=51)),
    (RejectionReason.STRATEGY_UNSUPPORTED, keyword(strategy="telepathy")),
    (RejectionReason.UNSAFE_CONTENT, keyword(optional_terms=("alpha; DROP TABLE x",))),
    (RejectionReason.TERM_LIMIT_EXCEEDED, keyword(optional_terms=("a" * 201,))),
    (RejectionReason.EMPTY_QUERY, keyword(optional_terms=())),
]


@pytest.mark.parametrize(("reason", "planned"), _REASON_CASES, ids=[r for r, _ in _REASON_CASES])
def test_each_rule_rejects_with_its_reason(reason: RejectionReason, planned: PlannedQuery) -> None:
    """A plan breaking exactly one rule is rejected with exactly that rule's reason."""
    outcome = make_world().validate([planned])
    assert outcome.queries == ()
    assert outcome.rejections == (Rejection(planned.source_id, planned.mapping_id, reason),)


def test_query_cap_exceeded_reason() -> None:
    """The fourth valid query for a source capped at three is rejected QUERY_CAP_EXCEEDED."""
    outcome = make_world().validate([keyword() for _ in range(4)])
    assert [q.query_id for q in outcome.queries] == ["s-1#1", "s-1#2", "s-1#3"]
    assert outcome.rejections == (Rejection("s-1", "m-1", RejectionReason.QUERY_CAP_EXCEEDED),)


def test_every_reason_has_a_test() -> None:
    """The cases above plus the cap test cover the whole closed set of reasons."""
    covered = {r for r, _ in _REASON_CASES} | {RejectionReason.QUERY_CAP_EXCEEDED}
    assert covered == set(RejectionReason)


# --- the rules in more detail -------------------------------------------------------------


def test_mapping_of_another_selected_source_is_out_of_scope() -> None:
    """A mapping named under the wrong source, or unknown, is MAPPING_NOT_IN_SCOPE."""
    planned = [keyword("s-1", "m-s-2"), keyword("s-2", "m-1"), keyword("s-1", "m-999")]
    assert _reasons(planned) == [RejectionReason.MAPPING_NOT_IN_SCOPE] * 3


def test_unknown_source_is_out_of_scope_and_never_named() -> None:
    """A source id outside the scope is rejected and its id stays out of every warning."""
    outcome = make_world().validate([keyword("secret-src", "m-x")])
    assert outcome.rejections[0].reason is RejectionReason.MAPPING_NOT_IN_SCOPE
    assert all("secret-src" not in w.message for w in outcome.warnings)


def test_mapping_of_another_tenant_is_out_of_scope() -> None:
    """A mapping carrying another tenant's id is refused even if a scope lists it."""
    foreign = rich_mapping(tenant_id="tenant-b")
    assert _reasons([keyword()], m1=foreign) == [RejectionReason.MAPPING_NOT_IN_SCOPE]


@pytest.mark.parametrize(
    ("strategy", "caps_strategies", "mapping_kw"),
    [
        ("recent", frozenset(Strategy), {"freshness_field": None}),
        ("synonym", frozenset({Strategy.KEYWORD}), {}),
        ("KEYWORD", frozenset(Strategy), {}),
    ],
)
def test_strategy_unsupported(
    strategy: str, caps_strategies: frozenset[Strategy], mapping_kw: dict[str, Any]
) -> None:
    """RECENT needs a freshness field; the provider must support it; names are exact."""
    caps = attrs.evolve(ALL_CAPS, strategies=caps_strategies)
    reasons = _reasons(
        [keyword(strategy=strategy)], m1=rich_mapping(**mapping_kw), capabilities={"s-1": caps}
    )
    assert reasons == [RejectionReason.STRATEGY_UNSUPPORTED]


def test_source_without_provider_capabilities_is_rejected() -> None:
    """Without stated capabilities nothing can be shown to be supported: fail closed."""
    assert _reasons([keyword()], capabilities={}) == [RejectionReason.STRATEGY_UNSUPPORTED]


def test_projection_is_title_content_then_requested_deduped() -> None:
    """Projection = title + content fields + requested ones, each once, in order."""
    (query,) = issue([keyword(fields=("status", "title", "year", "status"))])
    assert [p.name for p in query.projection] == ["title", "body", "status", "year"]
    assert query.projection[2] == ProjectedField(name="status", column="col_status")


def test_empty_field_request_projects_all_returnable_unrestricted_fields() -> None:
    """No requested fields → every returnable, unrestricted field."""
    (query,) = issue([keyword()])
    names = [p.name for p in query.projection]
    assert names == ["title", "body", "status", "year", "amount", "active", "published_on"]
    assert "salary" not in names
    assert "internal_notes" not in names


def test_freshness_field_is_attached() -> None:
    """The mapping's freshness field travels with the query for the aggregator."""
    (query,) = issue([keyword()])
    assert query.freshness == ProjectedField(name="published_on", column="col_published_on")


def test_filters_resolve_to_columns_and_typed_values() -> None:
    """Filters resolve to physical columns with checked operators and canonical values."""
    filters = (
        PlannedFilter("status", "in", ("open", "closed")),
        PlannedFilter("year", "gte", 2020.0),
        PlannedFilter("amount", "lt", 12.5),
        PlannedFilter("active", "eq", True),
        PlannedFilter("published_on", "gt", "20240131"),
    )
    (query,) = issue([keyword(filters=filters)])
    assert query.filters == (
        ResolvedFilter("col_status", FieldType.TEXT, Operator.IN, ("open", "closed")),
        ResolvedFilter("col_year", FieldType.INTEGER, Operator.GTE, (2020,)),
        ResolvedFilter("col_amount", FieldType.NUMBER, Operator.LT, (12.5,)),
        ResolvedFilter("col_active", FieldType.BOOLEAN, Operator.EQ, (True,)),
        ResolvedFilter("col_published_on", FieldType.DATE, Operator.GT, ("2024-01-31",)),
    )
    assert isinstance(query.filters[1].values[0], int)


@pytest.mark.parametrize(
    "flt",
    [
        PlannedFilter("status", "in", ()),
        PlannedFilter("status", "in", tuple(str(i) for i in range(51))),
        PlannedFilter("status", "in", "open"),
        PlannedFilter("status", "eq", ("open",)),
        PlannedFilter("year", "eq", True),
        PlannedFilter("year", "eq", 2**63),
        PlannedFilter("amount", "eq", float("nan")),
        PlannedFilter("amount", "eq", float("inf")),
        PlannedFilter("active", "eq", 1),
        PlannedFilter("published_on", "eq", "yesterday"),
        PlannedFilter("status", "eq", 3),
        PlannedFilter("status", "eq", "x" * 201),
    ],
)
def test_filter_value_invalid(flt: PlannedFilter) -> None:
    """Wrong types, empty or oversized IN lists, non-finite numbers are FILTER_VALUE_INVALID."""
    assert _reasons([keyword(filters=(flt,))]) == [RejectionReason.FILTER_VALUE_INVALID]


def test_in_filter_with_fifty_values_is_accepted() -> None:
    """Fifty values is the IN ceiling, inclusive."""
    values = tuple(str(i) for i in range(50))
    (query,) = issue([keyword(filters=(PlannedFilter("status", "in", values),))])
    assert query.filters[0].values == values


@pytest.mark.parametrize(
    ("flt", "caps_ops"),
    [
        (PlannedFilter("status", "like", "x"), frozenset(Operator)),
        (PlannedFilter("status", "EQ", "x"), frozenset(Operator)),
        (PlannedFilter("status", "ne", "x"), frozenset({Operator.EQ})),
    ],
)
def test_operator_not_permitted(flt: PlannedFilter, caps_ops: frozenset[Operator]) -> None:
    """Unknown operators, and ones the field or the provider does not allow, are refused."""
    caps = attrs.evolve(ALL_CAPS, operators=caps_ops)
    reasons = _reasons([keyword(filters=(flt,))], capabilities={"s-1": caps})
    assert reasons == [RejectionReason.OPERATOR_NOT_PERMITTED]


def test_filter_on_restricted_or_unknown_field() -> None:
    """Filtering on a restricted field is FIELD_RESTRICTED; on an unknown one UNKNOWN_FIELD."""
    planned = [
        keyword(filters=(PlannedFilter("salary", "eq", "1"),)),
        keyword(filters=(PlannedFilter("ghost", "eq", "1"),)),
    ]
    assert _reasons(planned) == [RejectionReason.FIELD_RESTRICTED, RejectionReason.UNKNOWN_FIELD]


def test_unsafe_text_filter_value() -> None:
    """A text filter value with a comment sequence is UNSAFE_CONTENT."""
    flt = PlannedFilter("status", "eq", "open' --")
    assert _reasons([keyword(filters=(flt,))]) == [RejectionReason.UNSAFE_CONTENT]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, 10), (1, 1), (50, 50)],
)
def test_limit_within_policy(limit: int | None, expected: int) -> None:
    """None takes the mapping default; 1 and the policy maximum are accepted."""
    (query,) = issue([keyword(limit=limit)])
    assert query.row_limit == expected


@pytest.mark.parametrize("limit", [0, -1, 51, 10**30])
def test_limit_out_of_policy(limit: int) -> None:
    """Limits outside 1..max_rows_per_query are LIMIT_OUT_OF_POLICY."""
    assert _reasons([keyword(limit=limit)]) == [RejectionReason.LIMIT_OUT_OF_POLICY]


def test_limit_bounded_by_provider_max_rows() -> None:
    """The provider's max_rows narrows the policy ceiling."""
    caps = attrs.evolve(ALL_CAPS, max_rows=5)
    assert _reasons([keyword(limit=6)], capabilities={"s-1": caps}) == [
        RejectionReason.LIMIT_OUT_OF_POLICY
    ]


def test_default_limit_never_exceeds_policy() -> None:
    """A mapping default above the policy ceiling is clamped when the planner names none."""
    world = make_world(
        m1=rich_mapping(default_template=DefaultTemplate(limit=500)),
        limits=CapabilityLimits(max_rows_per_query=20),
    )
    (query,) = world.validate([keyword()]).queries
    assert query.row_limit == 20


@pytest.mark.parametrize(
    "term",
    [
        "a;b",
        "a -- b",
        "/* hi",
        "bye */",
        "#tag",
        "nul\x00byte",
        "bell\x07",
        "line\nbreak",
        "para\u2029sep",
        "full\uff1bwidth",
        "\ud800",
    ],
)
def test_unsafe_terms(term: str) -> None:
    """Separators, comments, control characters and their full-width forms are refused."""
    for field in ("required_terms", "optional_terms", "excluded_terms", "phrases"):
        part: dict[str, Any] = {field: (term,)}
        assert _reasons([keyword(**part)]) == [RejectionReason.UNSAFE_CONTENT], field


def test_ordinary_punctuation_and_unicode_are_safe() -> None:
    """Hyphens, apostrophes, accents and joiners are ordinary search content."""
    terms = ("e-mail", "O'Brien", "café", "क्\u200dष", "C++", "50%")
    (query,) = issue([keyword(optional_terms=terms)])
    assert query.optional_terms == terms


def test_term_count_limit() -> None:
    """More terms and phrases in total than max_terms_per_query is TERM_LIMIT_EXCEEDED."""
    bound = CapabilityLimits().max_terms_per_query
    many = tuple(f"t{i}" for i in range(bound // 2 + 1))
    planned = keyword(optional_terms=many, phrases=tuple(f"p {i}" for i in range(bound // 2)))
    assert _reasons([planned]) == [RejectionReason.TERM_LIMIT_EXCEEDED]
    (ok,) = issue([keyword(optional_terms=many[:-1], phrases=("a b",) * (bound // 2))])
    assert len(ok.optional_terms) + len(ok.phrases) == bound


def test_optional_terms_are_issued_as_their_words() -> None:
    """An optional term of several words reaches the provider as those words, each once
    (case folded), in the plan's order; required terms, excluded terms and phrases keep
    their word sequences."""
    (query,) = issue(
        [
            keyword(
                optional_terms=("heat  transfer", "Heat", "e-bike battery", "TRANSFER rate"),
                required_terms=("solar panel",),
                excluded_terms=("spare part",),
                phrases=("wind farm",),
            )
        ]
    )
    assert query.optional_terms == ("heat", "transfer", "e-bike", "battery", "rate")
    assert query.required_terms == ("solar panel",)
    assert query.excluded_terms == ("spare part",)
    assert query.phrases == ("wind farm",)


def test_term_limit_counts_optional_words() -> None:
    """The term limit counts the words an optional term searches for: a plan within the
    limit as written but over it in words is TERM_LIMIT_EXCEEDED, and repeated words count
    once."""
    bound = CapabilityLimits().max_terms_per_query
    pairs = tuple(f"w{i} v{i}" for i in range(bound // 2 + 1))
    assert _reasons([keyword(optional_terms=pairs)]) == [RejectionReason.TERM_LIMIT_EXCEEDED]
    (ok,) = issue([keyword(optional_terms=pairs[:-1])])
    assert len(ok.optional_terms) == bound
    (repeated,) = issue([keyword(optional_terms=("alpha beta",) * (bound + 1))])
    assert repeated.optional_terms == ("alpha", "beta")


def test_unsafe_content_is_checked_before_terms_are_split() -> None:
    """Splitting on whitespace must not hide a control character that separates words."""
    for separator in ("\n", "\r", "\x1f", "\x85", "\u2028"):
        planned = keyword(optional_terms=(f"alpha{separator}beta",))
        assert _reasons([planned]) == [RejectionReason.UNSAFE_CONTENT], repr(separator)


def test_blank_terms_are_dropped_and_terms_stripped() -> None:
    """Whitespace-only terms vanish; the rest are stripped."""
    (query,) = issue([keyword(optional_terms=("  ", " alpha ", ""), phrases=("\t",))])
    assert query.optional_terms == ("alpha",)
    assert query.phrases == ()


@pytest.mark.parametrize(
    "kw",
    [
        {"optional_terms": ("   ",)},
        {"optional_terms": (), "excluded_terms": ("beta",)},
        {"optional_terms": (), "filters": (PlannedFilter("status", "eq", "open"),)},
    ],
)
def test_empty_query(kw: dict[str, Any]) -> None:
    """No required/optional terms and no phrases (non-RECENT) is EMPTY_QUERY."""
    assert _reasons([keyword(**kw)]) == [RejectionReason.EMPTY_QUERY]


def test_recent_query_may_have_no_terms() -> None:
    """RECENT over a mapping with a freshness field needs no terms."""
    (query,) = issue([keyword(strategy="recent", optional_terms=())])
    assert query.strategy is Strategy.RECENT


# --- caps, ids, warnings ------------------------------------------------------------------


def test_query_ids_number_each_source_in_order() -> None:
    """query_id is {source_id}#{n}, n counting each source's issued queries from 1."""
    planned = [keyword(), keyword("s-2"), keyword(limit=0), keyword(), keyword("s-2")]
    ids = [q.query_id for q in issue(planned)]
    assert ids == ["s-1#1", "s-2#1", "s-1#2", "s-2#2"]


def test_rejected_queries_do_not_use_up_the_cap() -> None:
    """Only otherwise-valid queries count toward the per-source cap."""
    planned = [keyword(limit=0), keyword(limit=0), keyword(), keyword(), keyword()]
    outcome = make_world().validate(planned)
    assert len(outcome.queries) == 3
    assert [r.reason for r in outcome.rejections] == [RejectionReason.LIMIT_OUT_OF_POLICY] * 2


def test_total_cap_across_sources() -> None:
    """Past max_total_queries every further valid query is QUERY_CAP_EXCEEDED."""
    world = make_world(limits=CapabilityLimits(max_total_queries=4))
    planned = [keyword(), keyword(), keyword("s-2"), keyword("s-2"), keyword("s-2"), keyword()]
    outcome = world.validate(planned)
    assert [q.query_id for q in outcome.queries] == ["s-1#1", "s-1#2", "s-2#1", "s-2#2"]
    assert [r.reason for r in outcome.rejections] == [RejectionReason.QUERY_CAP_EXCEEDED] * 2


def test_one_plan_rejected_warning_per_source() -> None:
    """Rejections yield one ESRA_PLAN_REJECTED per source with the count and reason codes."""
    planned = [keyword(limit=0), keyword(strategy="x"), keyword("s-2", limit=0), keyword()]
    outcome = make_world().validate(planned)
    assert [w.code for w in outcome.warnings] == [WarningCode.ESRA_PLAN_REJECTED] * 2
    first, second = (w.message for w in outcome.warnings)
    assert "2 planned queries" in first
    assert "Source s-1" in first
    assert "LIMIT_OUT_OF_POLICY, STRATEGY_UNSUPPORTED" in first
    assert "1 planned query" in second
    assert "Source s-2" in second


def test_valid_plan_has_no_warnings() -> None:
    """A fully valid plan produces queries and nothing else."""
    outcome = make_world().validate([keyword(), keyword("s-2")])
    assert len(outcome.queries) == 2
    assert (outcome.rejections, outcome.dropped_sources, outcome.warnings) == ((), (), ())


# --- record filters -----------------------------------------------------------------------


def test_present_claim_becomes_a_bound_record_filter() -> None:
    """The caller's claim value is bound into a ResolvedFilter on the filter's column."""
    world = make_world(m1=with_record_filter(), claims={"dept": "sales"})
    (query,) = world.validate([keyword()]).queries
    assert query.record_filters == (
        ResolvedFilter("col_dept", FieldType.TEXT, Operator.EQ, ("sales",)),
    )


def test_tuple_claim_becomes_in() -> None:
    """A multi-valued claim becomes an IN predicate over all its values."""
    world = make_world(m1=with_record_filter(), claims={"dept": ("sales", "ops")})
    (query,) = world.validate([keyword()]).queries
    assert query.record_filters == (
        ResolvedFilter("col_dept", FieldType.TEXT, Operator.IN, ("sales", "ops")),
    )


async def test_record_filter_is_applied_by_the_provider() -> None:
    """Executed, the bound record filter keeps other departments' rows out."""
    world = make_world(m1=with_record_filter(), claims={"dept": "ops"})
    (query,) = world.validate([keyword(optional_terms=("alpha", "beta"))]).queries
    rows = await InMemorySearchProvider(ROWS).execute(query, timeout_s=1.0)
    assert [r.key for r in rows] == ["2"]


@pytest.mark.parametrize(
    "claims",
    # An integer claim is no longer among them: a text field takes it as its digits, as a
    # template does (tests/core/test_record_filter_claims.py covers the shared check).
    [{}, {"dept": ()}, {"other": "sales"}, {"dept": ""}, {"dept": True}],
    ids=["absent", "empty-tuple", "other-claim", "empty-string", "wrong-type-bool"],
)
def test_missing_claim_drops_the_whole_source(claims: dict[str, Any]) -> None:
    """A missing or unusable claim drops every query of the source; others are unaffected."""
    plain = make_mapping("m-plain", source_id="s-1")
    world = make_world(m1=with_record_filter(), claims=claims, extra_s1_mappings=[plain])
    planned = [keyword(), keyword(mapping_id="m-plain"), keyword("s-2"), keyword(limit=0)]
    outcome = world.validate(planned)
    assert [q.source_id for q in outcome.queries] == ["s-2"]
    assert outcome.dropped_sources == ("s-1",)
    assert outcome.rejections == ()
    (warning,) = outcome.warnings
    assert warning.code is WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM
    assert "Source s-1" in warning.message
    assert "dept" not in warning.message


def test_tuple_claim_with_ordering_operator_fails_closed() -> None:
    """A multi-valued claim cannot feed an ordering operator: the source is dropped."""
    world = make_world(m1=with_record_filter(operator=Operator.LT), claims={"dept": ("a",)})
    outcome = world.validate([keyword()])
    assert outcome.queries == ()
    assert outcome.dropped_sources == ("s-1",)


def test_dropped_source_warning_never_echoes_claim_value() -> None:
    """Claim values never appear in any warning, dropped or not."""
    world = make_world(m1=with_record_filter(claim="region"), claims={"dept": "top-secret-7"})
    outcome = world.validate([keyword()])
    assert all("top-secret-7" not in w.message for w in outcome.warnings)
    assert outcome.dropped_sources == ("s-1",)


def test_mappings_without_record_filters_bind_none() -> None:
    """A mapping without record filters issues queries with no record predicates."""
    (query,) = issue([keyword("s-2")])
    assert query.record_filters == ()


def test_validated_query_carries_checked_content() -> None:
    """Every planned part lands in the issued query, resolved and typed."""
    planned = keyword(
        required_terms=("alpha",),
        optional_terms=("budget",),
        excluded_terms=("beta",),
        phrases=("alpha plan",),
        strategy="phrase",
        limit=7,
    )
    (query,) = issue([planned])
    assert (query.source_id, query.mapping.id, query.strategy) == ("s-1", "m-1", Strategy.PHRASE)
    assert query.required_terms == ("alpha",)
    assert query.excluded_terms == ("beta",)
    assert query.phrases == ("alpha plan",)
    assert query.row_limit == 7


def test_hostile_types_are_rejected_not_raised() -> None:
    """Wrongly typed parts from a hostile planner are rejected, never raised."""
    bad: list[PlannedQuery] = [
        keyword(optional_terms=("ok", 5)),
        keyword(optional_terms="alpha"),
        keyword(fields=(None,)),
        keyword(filters=("status=open",)),
        keyword(filters=(PlannedFilter(["status"], "eq", "x"),)),  # type: ignore[arg-type]
        keyword(limit="10"),
        keyword(limit=True),
        keyword(strategy=None),
        PlannedQuery(source_id=["s-1"], mapping_id={}, strategy="keyword"),  # type: ignore[arg-type]
    ]
    outcome = make_world().validate(bad)
    assert outcome.queries == ()
    assert len(outcome.rejections) == len(bad)


def test_capabilities_narrow_per_source() -> None:
    """Each source is checked against its own provider's capabilities."""
    narrow = ProviderCapabilities(
        strategies=frozenset({Strategy.PHRASE}),
        operators=frozenset(),
        text_index=TextIndexKind.SQLITE_FTS5,
    )
    world = make_world(capabilities={"s-1": ALL_CAPS, "s-2": narrow})
    outcome = world.validate([keyword(), keyword("s-2")])
    assert [q.source_id for q in outcome.queries] == ["s-1"]
    assert outcome.rejections == (Rejection("s-2", "m-s-2", RejectionReason.STRATEGY_UNSUPPORTED),)


def test_the_reserved_tenant_claim_comes_from_the_context_not_the_caller() -> None:
    """A record filter on ``esra.tenant_id`` binds the invocation's tenant; a caller-sent
    claim of that name is ignored, so tenant isolation can live in the query itself."""
    from esra.core._pipeline.validation import TENANT_CLAIM, context_claims
    from tests.core.factories import make_context

    ctx = make_context(claims={TENANT_CLAIM: "tenant-evil", "region": "emea"})
    claims = context_claims(ctx)
    assert claims[TENANT_CLAIM] == ctx.tenant_id
    assert claims["region"] == "emea"
