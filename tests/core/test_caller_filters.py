"""Caller filters: validated like the planner's, ANDed into every search, never dropped."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core.codes import AuditEvent, WarningCode
from esra.core.config import ConfigSnapshot, Operator
from esra.core.exceptions import InvalidRequestError
from esra.core.pipeline.caller_filters import MAX_CALLER_FILTERS, filters_digest
from esra.core.query import PlannedFilter, ResultRow
from esra.core.retriever import Retriever
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from esra.core.validation import ValidatedQuery
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
ROWS = {
    "m-s-1": [
        {"col_id": 1, "col_title": "Leave in EMEA", "col_body": "leave days", "col_region": "emea"},
        {"col_id": 2, "col_title": "Leave in AMER", "col_body": "leave days", "col_region": "amer"},
        {"col_id": 3, "col_title": "Leave in APAC", "col_body": "leave days", "col_region": "apac"},
    ],
    "m-s-2": [{"col_id": 9, "col_title": "Leave form", "col_body": "leave request"}],
}


def _world(*, cache: bool = False) -> tuple[Retriever, InMemoryAuditSink, dict[str, int]]:
    mappings = [
        make_mapping(
            "m-s-1",
            source_id="s-1",
            fields=(make_field("title"), make_field("body"), REGION, SECRET),
        ),
        # With the cache on, both mappings can apply the filter, so responses are complete
        # (only complete responses are cached).
        make_mapping(
            "m-s-2",
            source_id="s-2",
            fields=(make_field("title"), make_field("body"), *((REGION,) if cache else ())),
        ),
    ]
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2")],
        capability=make_capability(["s-1", "s-2"]),
        mappings=mappings,
    )
    if cache:
        snapshot = _with_result_cache(snapshot)
    audit = InMemoryAuditSink()
    calls = {"s-1": 0, "s-2": 0}

    class Counting(InMemorySearchProvider):
        def __init__(self, source: str) -> None:
            super().__init__(ROWS)
            self._source = source

        async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
            calls[self._source] += 1
            return await super().execute(query, timeout_s=timeout_s)

    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": Counting("s-1"), "s-2": Counting("s-2")},
        model=FakeLanguageModel(),
        audit=audit,
        clock=FakeClock(),
        cache=InMemoryCache() if cache else None,
    )
    return retriever, audit, calls


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


async def test_in_filters_take_lists() -> None:
    """``in`` takes a list of values; each is a bind parameter."""
    retriever, _, _ = _world()
    response = await retriever.retrieve(
        make_context(), "leave", filters=[_eq("region", ["emea", "apac"], "in")]
    )
    assert sorted(r.title for r in response.results) == ["Leave in APAC", "Leave in EMEA"]


@pytest.mark.parametrize(
    "bad",
    [
        _eq("salary", "100000"),  # restricted: filtering would reveal its values
        _eq("title", "x"),  # not filterable
        _eq("region", "emea", "gt"),  # operator not permitted for the field
        _eq("region", ["emea"], "eq"),  # eq takes one value
        _eq("region", "emea'; DROP TABLE t; --"),  # statement separator / comment
    ],
)
async def test_a_filter_the_validator_refuses_runs_no_search_on_that_mapping(
    bad: PlannedFilter,
) -> None:
    """The query carrying it is rejected whole: the caller's narrowing is never dropped."""
    retriever, audit, calls = _world()
    response = await retriever.retrieve(make_context(), "leave", filters=[bad])
    assert response.results == ()
    assert calls == {"s-1": 0, "s-2": 0}
    codes = {w.code for w in response.warnings}
    assert WarningCode.ESRA_PLAN_REJECTED in codes
    assert audit.events(AuditEvent.PLAN_REJECTED)


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
