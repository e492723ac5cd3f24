"""Caller filters: only on fields the caller may filter, ANDed into every search, never dropped.

A filter on any other field — restricted, hidden, outside the scope or nonexistent — is one
and the same ``ESRA_INVALID_REQUEST`` naming the allowed fields (issue 13, item 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._pipeline.caller_filters import (
    MAX_CALLER_FILTERS,
    CallerFilterField,
    caller_filter_fields,
    filters_digest,
)
from esra.core._pipeline.scope import ScopedSource
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import PlannedFilter, ResultRow
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, WarningCode
from esra.core.config import (
    BindingMode,
    ConfigSnapshot,
    FieldSpec,
    FieldType,
    Operator,
    RecordFilter,
    SourceHealth,
)
from esra.core.exceptions import InvalidRequestError
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core._validation_fixtures import ALL_CAPS, keyword, make_world
from tests.core.factories import (
    make_capability,
    make_context,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)
from tests.core.test_retriever import _retriever

REGION = make_field("region", filterable=True, operators=(Operator.EQ, Operator.IN))
SECRET = make_field("salary", filterable=True, restricted=True, operators=(Operator.EQ,))
HIDDEN = make_field("grade", filterable=True, returnable=False, operators=(Operator.EQ,))
BUDGET = make_field("budget", filterable=True, operators=(Operator.EQ,))
ROWS = {
    "m-s-1": [
        {"col_id": 1, "col_title": "Leave in EMEA", "col_body": "leave days", "col_region": "emea"},
        {"col_id": 2, "col_title": "Leave in AMER", "col_body": "leave days", "col_region": "amer"},
        {"col_id": 3, "col_title": "Leave in APAC", "col_body": "leave days", "col_region": "apac"},
    ],
    "m-s-2": [{"col_id": 9, "col_title": "Leave form", "col_body": "leave request"}],
}


def _world(
    *, cache: bool = False, second_fields: tuple[FieldSpec, ...] = ()
) -> tuple[Retriever, InMemoryAuditSink, dict[str, int]]:
    retriever, audit, calls, _ = _world_with_model(cache=cache, second_fields=second_fields)
    return retriever, audit, calls


def _world_with_model(
    *, cache: bool = False, second_fields: tuple[FieldSpec, ...] = ()
) -> tuple[Retriever, InMemoryAuditSink, dict[str, int], FakeLanguageModel]:
    mappings = [
        make_mapping(
            "m-s-1",
            source_id="s-1",
            fields=(make_field("title"), make_field("body"), REGION, SECRET, HIDDEN),
        ),
        # With the cache on, both mappings can apply the filter, so responses are complete
        # (only complete responses are cached).
        make_mapping(
            "m-s-2",
            source_id="s-2",
            fields=(
                make_field("title"),
                make_field("body"),
                *((REGION,) if cache else second_fields),
            ),
        ),
        # Not bound to the capability: outside every caller's scope.
        make_mapping(
            "m-s-3",
            source_id="s-3",
            fields=(make_field("title"), make_field("body"), BUDGET),
        ),
    ]
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2"), make_source("s-3")],
        capability=make_capability(["s-1", "s-2"]),
        mappings=mappings,
    )
    if cache:
        snapshot = _with_result_cache(snapshot)
    audit = InMemoryAuditSink()
    calls = {"s-1": 0, "s-2": 0, "s-3": 0}

    class Counting(InMemorySearchProvider):
        def __init__(self, source: str) -> None:
            super().__init__(ROWS)
            self._source = source

        async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
            calls[self._source] += 1
            return await super().execute(query, timeout_s=timeout_s)

    model = FakeLanguageModel()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": Counting("s-1"), "s-2": Counting("s-2"), "s-3": Counting("s-3")},
        model=model,
        audit=audit,
        clock=FakeClock(),
        cache=InMemoryCache() if cache else None,
    )
    return retriever, audit, calls, model


def _with_result_cache(snapshot: ConfigSnapshot) -> ConfigSnapshot:
    capabilities = tuple(
        attrs.evolve(c, limits=attrs.evolve(c.limits, result_cache_ttl_s=60))
        for c in snapshot.capabilities
    )
    return attrs.evolve(snapshot, capabilities=capabilities)


def _eq(field: str, value: object, operator: str = "eq") -> PlannedFilter:
    return PlannedFilter(field=field, operator=operator, value=value)  # type: ignore[arg-type]


async def test_a_filter_narrows_every_search_and_skips_sources_that_cannot_apply_it() -> None:
    """region = emea returns only EMEA rows; the source without a region is not searched."""
    retriever, audit, calls = _world()
    response = await retriever.retrieve(make_context(), "leave", filters=[_eq("region", "emea")])
    assert [r.title for r in response.results] == ["Leave in EMEA"]
    assert calls["s-2"] == 0
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_CALLER_FILTER_UNSUPPORTED]
    (record,) = audit.events(AuditEvent.RETRIEVE)
    assert record.dimensions["caller_filters"] == ("region",)
    assert "emea" not in repr(record.dimensions)


async def test_a_listed_field_of_a_source_that_is_down_is_still_accepted() -> None:
    """The check uses the fields the tool schema lists, not this call's health probe.

    Only s-1 has ``region``; while it is down a region filter is not refused as an unknown
    field (the schema still lists it): the call runs, and s-2, which has no region, is
    skipped with its warning.
    """
    retriever, _, calls = _world()
    provider = retriever._providers["s-1"]
    assert isinstance(provider, InMemorySearchProvider)
    provider.health_state = SourceHealth.UNAVAILABLE
    response = await retriever.retrieve(make_context(), "leave", filters=[_eq("region", "emea")])
    assert response.results == ()
    assert calls == {"s-1": 0, "s-2": 0, "s-3": 0}
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_CALLER_FILTER_UNSUPPORTED]


async def test_in_filters_take_lists() -> None:
    """``in`` takes a list of values; each is a bind parameter."""
    retriever, _, _ = _world()
    response = await retriever.retrieve(
        make_context(), "leave", filters=[_eq("region", ["emea", "apac"], "in")]
    )
    assert sorted(r.title for r in response.results) == ["Leave in APAC", "Leave in EMEA"]


ONLY_REGION = "A filter may name only these fields: region."


@pytest.mark.parametrize(
    "field",
    [
        "salary",  # restricted: filtering would reveal its values
        "grade",  # filterable but never returned: as hidden as a restricted field
        "title",  # returned but not filterable
        "budget",  # filterable, but only in a source outside the caller's scope
        "no_such_field",  # exists nowhere
    ],
)
async def test_a_filter_on_a_field_the_caller_may_not_filter_reads_like_an_unknown_one(
    field: str,
) -> None:
    """One fixed message naming the allowed fields, never the requested one; nothing runs."""
    retriever, audit, calls, model = _world_with_model()
    with pytest.raises(InvalidRequestError) as refused:
        await retriever.retrieve(make_context(), "leave", filters=[_eq(field, "x")])
    assert str(refused.value) == ONLY_REGION
    assert field not in str(refused.value)
    assert calls == {"s-1": 0, "s-2": 0, "s-3": 0}
    assert model.prompts == []  # refused before selection: no model call
    (record,) = audit.events(AuditEvent.RETRIEVE)
    assert (record.outcome, record.reason) == ("rejected", "ESRA_INVALID_REQUEST")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_eq("region", "emea", "gt"), "A filter on region may use only these operators: eq, in."),
        (
            _eq("region", ["emea"], "eq"),
            "A filter with the in operator takes a list of values; "
            "any other operator takes one value.",
        ),
        (
            _eq("region", "emea", "in"),
            "A filter with the in operator takes a list of values; "
            "any other operator takes one value.",
        ),
        (_eq("region", 5), "A filter on region takes text."),
    ],
)
async def test_an_allowed_field_used_wrongly_is_a_clear_invalid_request(
    bad: PlannedFilter, message: str
) -> None:
    """The operator, the value's shape and its type are checked, naming what is allowed."""
    retriever, _, calls = _world()
    with pytest.raises(InvalidRequestError) as refused:
        await retriever.retrieve(make_context(), "leave", filters=[bad])
    assert str(refused.value) == message
    assert calls == {"s-1": 0, "s-2": 0, "s-3": 0}


async def test_unsafe_filter_content_is_still_refused_by_the_validator() -> None:
    """Defence in depth: a checked filter is validated like the planner's; its query never runs."""
    retriever, audit, calls = _world()
    response = await retriever.retrieve(
        make_context(), "leave", filters=[_eq("region", "emea'; DROP TABLE t; --")]
    )
    assert response.results == ()
    assert calls == {"s-1": 0, "s-2": 0, "s-3": 0}
    assert WarningCode.ESRA_PLAN_REJECTED in {w.code for w in response.warnings}
    (rejected,) = audit.events(AuditEvent.PLAN_REJECTED)
    assert rejected.reason == "UNSAFE_CONTENT"


async def test_a_mapping_with_the_field_restricted_is_skipped_like_one_without_it() -> None:
    """region is filterable in s-1 but restricted in s-2: s-2 is not searched, and its warning
    is the very text a source without any region field gets — never FIELD_RESTRICTED."""
    restricted_here = make_field(
        "region", filterable=True, restricted=True, operators=(Operator.EQ,)
    )
    warnings = {}
    for second in ((restricted_here,), ()):
        retriever, _, calls = _world(second_fields=second)
        response = await retriever.retrieve(
            make_context(), "leave", filters=[_eq("region", "emea")]
        )
        assert [r.title for r in response.results] == ["Leave in EMEA"]
        assert calls["s-2"] == 0
        warnings[bool(second)] = [(w.code, w.message) for w in response.warnings]
    assert (
        warnings[True]
        == warnings[False]
        == [
            (
                WarningCode.ESRA_CALLER_FILTER_UNSUPPORTED,
                "Source s-2 was not searched: it cannot apply every requested filter.",
            )
        ]
    )


def _scoped(source_id: str, *fields: FieldSpec, **mapping: Any) -> ScopedSource:
    return ScopedSource(
        source=make_source(source_id),
        mode=BindingMode.OPTIONAL,
        mappings=(make_mapping(f"m-{source_id}", source_id=source_id, fields=fields, **mapping),),
        health=SourceHealth.HEALTHY,
    )


def test_the_fields_a_caller_may_filter_merge_mappings_and_respect_engine_and_claims() -> None:
    """Operators are the field's and the engine's; a source whose record security the caller
    cannot satisfy, or without a provider, contributes nothing."""
    year = make_field(
        "year", type=FieldType.INTEGER, filterable=True, operators=(Operator.EQ, Operator.GT)
    )
    year_text = make_field("year", filterable=True, operators=(Operator.IN,))
    secured = _scoped(
        "s-3",
        make_field("team", filterable=True, operators=(Operator.EQ,)),
        record_filters=(RecordFilter(field="team", claim="team"),),
    )
    sources = [
        _scoped("s-1", year, SECRET),
        _scoped("s-2", year_text),
        secured,
        _scoped("s-4", make_field("orphan", filterable=True, operators=(Operator.EQ,))),
    ]
    caps = {
        "s-1": attrs.evolve(ALL_CAPS, operators=frozenset({Operator.EQ, Operator.IN})),
        "s-2": ALL_CAPS,
        "s-3": ALL_CAPS,
    }
    assert caller_filter_fields(make_context(), sources, caps) == (
        CallerFilterField(
            name="year",
            operators=(Operator.EQ, Operator.IN),
            types=(FieldType.TEXT, FieldType.INTEGER),
        ),
    )
    with_team = caller_filter_fields(make_context(claims={"team": "blue"}), sources, caps)
    assert [f.name for f in with_team] == ["team", "year"]


async def test_too_many_filters_are_an_invalid_request() -> None:
    """Refused before anything runs."""
    retriever, audit, _ = _world()
    with pytest.raises(InvalidRequestError):
        await retriever.retrieve(
            make_context(), "leave", filters=[_eq("region", "emea")] * (MAX_CALLER_FILTERS + 1)
        )
    assert audit.records == []


async def test_cached_results_are_never_served_across_different_filters() -> None:
    """The result cache key covers the filters: EMEA's answer never answers AMER."""
    retriever, _, calls = _world(cache=True)
    emea = await retriever.retrieve(make_context(), "leave", filters=[_eq("region", "emea")])
    amer = await retriever.retrieve(make_context(), "leave", filters=[_eq("region", "amer")])
    again = await retriever.retrieve(make_context(), "leave", filters=[_eq("region", "emea")])
    assert [r.title for r in emea.results] == ["Leave in EMEA"]
    assert [r.title for r in amer.results] == ["Leave in AMER"]
    assert [r.title for r in again.results] == ["Leave in EMEA"]
    assert (emea.status.value, calls["s-1"]) == ("complete", 2)  # the third call was a hit


async def test_without_filters_nothing_changes() -> None:
    """No filters: the same results as the plain retriever, no new warning."""
    retriever, _, _ = _retriever()
    response = await retriever.retrieve(make_context(), "leave policy", filters=())
    assert response.warnings == ()


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["region", "title"]),
            st.sampled_from(["eq", "in"]),
            st.one_of(st.text(max_size=5), st.integers(), st.booleans()),
        ),
        max_size=4,
    )
)
def test_the_digest_is_order_insensitive_and_type_sensitive(
    raw: list[tuple[str, str, object]],
) -> None:
    """Reordering filters keeps the key; a value of another type changes it."""
    filters = [_eq(f, v, o) for f, o, v in raw]
    assert filters_digest(filters) == filters_digest(list(reversed(filters)))
    if filters:
        typed = [_eq("region", 1), *filters]
        texted = [_eq("region", "1"), *filters]
        assert filters_digest(typed) != filters_digest(texted)


def test_a_planned_filter_on_a_restricted_or_hidden_field_reads_as_unknown_in_the_response() -> (
    None
):
    """A caller steering the planner through its prompt learns no more than through filters:
    the response says UNKNOWN_FIELD for a restricted, hidden or non-filterable field alike,
    while the audit keeps the precise reason."""
    messages: list[str] = []
    reasons: list[str] = []
    for field in ("salary", "internal_notes", "dept", "ghost"):
        outcome = make_world().validate([keyword(filters=(_eq(field, "1"),))])
        reasons.extend(r.reason.value for r in outcome.rejections)
        messages.extend(w.message for w in outcome.warnings)
    assert reasons == [
        "FIELD_RESTRICTED",
        "FIELD_NOT_FILTERABLE",
        "FIELD_NOT_FILTERABLE",
        "UNKNOWN_FIELD",
    ]
    assert set(messages) == {"1 planned query for source 'Source s-1' rejected: UNKNOWN_FIELD."}
