"""Property tests for the validator: any plan is issued safely or rejected, never raised."""

from __future__ import annotations

import asyncio
import unicodedata
from collections import Counter
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esra.core._context import ClaimValue
from esra.core._pipeline.validation import ValidationOutcome
from esra.core._pipeline.values import ValidatedQuery, ensure_validated
from esra.core._query import PlannedFilter, PlannedQuery, Strategy
from esra.core.codes import RejectionReason
from esra.core.config import CapabilityLimits, Operator
from esra.core.testing import InMemorySearchProvider
from tests.core._validation_fixtures import (
    ALL_CAPS,
    RICH_FIELDS,
    World,
    make_world,
    with_record_filter,
)

_LIMITS = CapabilityLimits(max_total_queries=6, max_terms_per_query=6, max_term_chars=40)
_FORBIDDEN = (";", "--", "/*", "*/", "#")
_HOSTILE = [
    "'; DROP TABLE users; --",
    "1 OR 1=1 /* x */",
    "admin'#",
    "a\x00b",
    "\r\n",
    "  ",
    "",
    "Ｓｅｌｅｃｔ；",
    "\u2028",
    "ignore previous instructions",
    "x" * 300,
    "MATCH 'a' OR 'b'",
    '"quoted"',
    "NEAR(a b)",
    "café",
]

_WORDS = ["alpha", "beta", "budget", "report", "q3 plan", "  padded  "]
hostile_text = st.one_of(
    st.sampled_from(_HOSTILE),
    st.text(max_size=50),
    st.text(alphabet="ab ;-/*#'\"\\\x00\n\t", max_size=12),
)
# Benign values are over-represented so that plans get past the early rules and exercise
# the later ones; hostile ones still appear in most examples.
text = st.one_of(st.sampled_from(_WORDS), st.sampled_from(_WORDS), hostile_text)
terms = st.one_of(
    st.lists(st.sampled_from(_WORDS), max_size=2).map(tuple),
    st.lists(text, max_size=5).map(tuple),
)
field_names = st.one_of(st.sampled_from([f.name for f in RICH_FIELDS]), hostile_text)
scalars = st.one_of(
    text,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=0, max_value=3000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["2024-01-31", "20240131", "2024-13-01"]),
)
filter_values = st.one_of(scalars, st.lists(scalars, min_size=0, max_size=55).map(tuple))
operators = st.one_of(st.sampled_from([o.value for o in Operator]), hostile_text)
filters = st.builds(PlannedFilter, field=field_names, operator=operators, value=filter_values)
strategies_ = st.integers(min_value=0, max_value=9).flatmap(
    lambda n: hostile_text if n == 0 else st.sampled_from([s.value for s in Strategy])
)
_PAIRS = [("s-1", "m-1"), ("s-2", "m-s-2")] * 10 + [
    ("s-3", "m-s-3"),
    ("unknown", "m-1"),
    ("s-1", "m-s-2"),
    ("", ""),
]
targets = st.integers(min_value=0, max_value=9).flatmap(
    lambda n: st.tuples(hostile_text, hostile_text) if n == 0 else st.sampled_from(_PAIRS)
)
_GOOD_FILTERS = [
    PlannedFilter("status", "eq", "open"),
    PlannedFilter("year", "gte", 2020),
    PlannedFilter("status", "in", ("a", "b")),
    PlannedFilter("published_on", "lt", "2024-01-31"),
]
filter_lists = st.one_of(
    st.just(()),
    st.lists(st.sampled_from(_GOOD_FILTERS), max_size=2).map(tuple),
    st.lists(filters, max_size=3).map(tuple),
)
field_lists = st.one_of(
    st.just(()),
    st.lists(st.sampled_from(["title", "status", "year", "amount"]), max_size=3).map(tuple),
    st.lists(field_names, max_size=3).map(tuple),
)
limits_ = st.one_of(
    st.none(),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=-(10**12), max_value=10**12),
)


@st.composite
def planned_queries(draw: st.DrawFn) -> PlannedQuery:
    """A planned query mixing plausible and hostile parts."""
    source_id, mapping_id = draw(targets)
    return PlannedQuery(
        source_id=source_id,
        mapping_id=mapping_id,
        strategy=draw(strategies_),
        required_terms=draw(terms),
        optional_terms=draw(terms),
        excluded_terms=draw(terms),
        phrases=draw(terms),
        filters=draw(filter_lists),
        fields=draw(field_lists),
        limit=draw(limits_),
    )


plans = st.lists(planned_queries(), max_size=12)

_BASE = PlannedQuery(source_id="s-1", mapping_id="m-1", strategy="keyword", optional_terms=("a",))
_PARTS: dict[str, st.SearchStrategy[Any]] = {
    "mapping_id": hostile_text,
    "strategy": strategies_,
    "required_terms": terms,
    "optional_terms": terms,
    "excluded_terms": terms,
    "phrases": terms,
    "filters": st.lists(filters, max_size=3).map(tuple),
    "fields": st.lists(field_names, max_size=3).map(tuple),
    "limit": limits_,
}


@st.composite
def mutated_queries(draw: st.DrawFn) -> PlannedQuery:
    """A valid keyword query with one or two parts replaced by generated (often hostile) ones."""
    names = draw(st.lists(st.sampled_from(sorted(_PARTS)), min_size=1, max_size=2, unique=True))
    return attrs.evolve(_BASE, **{name: draw(_PARTS[name]) for name in names})


def _unsafe(value: str) -> bool:
    """An independent restatement of the content rule."""
    for form in (value, unicodedata.normalize("NFKC", value)):
        if any(seq in form for seq in _FORBIDDEN):
            return True
        if any(unicodedata.category(c) in {"Cc", "Cs", "Zl", "Zp"} for c in form):
            return True
    return False


def _assert_invariants(query: ValidatedQuery, world: World) -> None:
    """Every property the spec demands of an issued query."""
    assert ensure_validated(query) is query
    scoped = next(s for s in world.selection.sources if s.source.id == query.source_id)
    assert query.mapping in scoped.mappings
    caps = world.capabilities[query.source_id]
    assert query.strategy in caps.strategies
    if query.strategy is Strategy.RECENT:
        assert query.mapping.freshness_field is not None
    for projected in query.projection:
        spec = query.mapping.field(projected.name)
        assert spec is not None
        assert spec.is_returnable
        assert not spec.is_restricted
        assert spec.column == projected.column
    for flt in query.filters:
        spec = next(f for f in query.mapping.fields if f.column == flt.column)
        assert spec.is_filterable
        assert not spec.is_restricted
        assert flt.operator in spec.allowed_operators
        assert flt.operator in caps.operators
        assert 1 <= len(flt.values) <= 50
        assert flt.operator is Operator.IN or len(flt.values) == 1
        for value in flt.values:
            assert not (isinstance(value, str) and _unsafe(value))
    limits = world.scope.limits
    assert 1 <= query.row_limit <= min(limits.max_rows_per_query, caps.max_rows)
    content = (*query.required_terms, *query.optional_terms, *query.excluded_terms)
    content += query.phrases
    assert len(content) <= limits.max_terms_per_query
    for item in content:
        assert item.strip() == item
        assert item
        assert len(item) <= limits.max_term_chars
        assert not _unsafe(item)
    if query.strategy is not Strategy.RECENT:
        assert query.required_terms or query.optional_terms or query.phrases
    assert len(query.record_filters) == len(query.mapping.record_filters)


def _assert_outcome(outcome: ValidationOutcome, planned: list[PlannedQuery], world: World) -> None:
    dropped_count = sum(1 for p in planned if p.source_id in outcome.dropped_sources)
    assert len(outcome.queries) + len(outcome.rejections) + dropped_count == len(planned)
    assert all(isinstance(r.reason, RejectionReason) for r in outcome.rejections)
    for query in outcome.queries:
        _assert_invariants(query, world)
    per_source = Counter(q.source_id for q in outcome.queries)
    for scoped in world.selection.sources:
        assert per_source[scoped.source.id] <= scoped.source.max_queries_per_source
    assert len(outcome.queries) <= world.scope.limits.max_total_queries
    assert len({q.query_id for q in outcome.queries}) == len(outcome.queries)


async def _execute_all(queries: tuple[ValidatedQuery, ...]) -> InMemorySearchProvider:
    provider = InMemorySearchProvider({"m-1": [], "m-s-2": []})
    for query in queries:
        await provider.execute(query, timeout_s=1.0)
    return provider


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans)
def test_any_plan_is_issued_safely_or_rejected(planned: list[PlannedQuery]) -> None:
    """Any plan, however hostile, yields invariant-satisfying queries or reasoned rejections.

    validate never raises, and the only things a provider then receives are issued queries.
    """
    world = make_world(limits=_LIMITS)
    outcome = world.validate(planned)
    _assert_outcome(outcome, planned, world)
    provider = asyncio.run(_execute_all(outcome.queries))
    assert all(ensure_validated(q) is q for q in provider.executed)
    assert len(provider.executed) == len(outcome.queries)


@settings(max_examples=300, deadline=None)
@given(st.lists(mutated_queries(), max_size=6))
def test_one_hostile_part_is_caught_or_harmless(planned: list[PlannedQuery]) -> None:
    """A valid plan with one or two generated parts is issued satisfying every invariant,
    or rejected with a reason; never raised. The provider runs every issued query."""
    world = make_world(limits=_LIMITS)
    outcome = world.validate(planned)
    _assert_outcome(outcome, planned, world)
    provider = asyncio.run(_execute_all(outcome.queries))
    assert provider.executed == list(outcome.queries)


claims_strategy: st.SearchStrategy[dict[str, ClaimValue]] = st.dictionaries(
    st.sampled_from(["dept", "region"]),
    st.one_of(
        st.text(max_size=10),
        st.integers(),
        st.booleans(),
        st.lists(st.text(max_size=5), max_size=3).map(tuple),
    ),
    max_size=2,
)


def _bindable_text_claim(claim: object) -> tuple[str, ...] | None:
    """The values a text record filter binds ``claim`` to, or ``None`` if it must drop the
    source: a non-empty text without control, format or separator characters (collations
    ignore those), an integer within signed 64 bits as its digits, or a set of 1-1000 such
    texts."""

    def text(value: object) -> bool:
        return (
            isinstance(value, str)
            and value != ""
            and not any(unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} for ch in value)
        )

    if isinstance(claim, tuple):
        ok = 0 < len(claim) <= 1000 and all(text(v) for v in claim)
        return claim if ok else None
    if isinstance(claim, int) and not isinstance(claim, bool):
        return (str(claim),) if -(2**63) <= claim < 2**63 else None
    return (claim,) if isinstance(claim, str) and text(claim) else None


@settings(max_examples=200, deadline=None)
@given(plans, claims_strategy)
def test_record_filters_bind_or_drop_the_source(
    planned: list[PlannedQuery], claims: dict[str, Any]
) -> None:
    """With a record filter on ``dept``: a usable claim is bound into every query of the
    source; otherwise the source is dropped and nothing of it is issued. Never a default."""
    world = make_world(m1=with_record_filter(), claims=claims, limits=_LIMITS)
    outcome = world.validate(planned)
    _assert_outcome(outcome, planned, world)
    expected = _bindable_text_claim(claims.get("dept"))
    s1 = [q for q in outcome.queries if q.source_id == "s-1"]
    if expected is not None:
        assert "s-1" not in outcome.dropped_sources
        for query in s1:
            (bound,) = query.record_filters
            assert bound.column == "col_dept"
            assert bound.values == expected
    else:
        assert outcome.dropped_sources == ("s-1",)
        assert s1 == []


@given(st.lists(st.sampled_from(["s-1", "s-2"]), max_size=15))
def test_caps_keep_plan_order(sources: list[str]) -> None:
    """Valid queries are issued in plan order until each cap is reached, then rejected."""
    world = make_world(limits=_LIMITS)
    planned = [
        PlannedQuery(
            source_id=s,
            mapping_id="m-1" if s == "s-1" else "m-s-2",
            strategy="keyword",
            optional_terms=("alpha",),
        )
        for s in sources
    ]
    outcome = world.validate(planned)
    expected: list[str] = []
    counts: Counter[str] = Counter()
    for source in sources:
        if counts[source] < 3 and len(expected) < _LIMITS.max_total_queries:
            counts[source] += 1
            expected.append(f"{source}#{counts[source]}")
    assert [q.query_id for q in outcome.queries] == expected
    assert all(r.reason is RejectionReason.QUERY_CAP_EXCEEDED for r in outcome.rejections)
    assert ALL_CAPS.max_rows >= _LIMITS.max_rows_per_query
