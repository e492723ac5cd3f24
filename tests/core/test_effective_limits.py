"""The effective limits and response modes: the capability's, narrowed by exposure and policy.

Regression for scope resolution copying the capability's limits and modes verbatim, so an
exposure or access policy that should have tightened them for its audience changed nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import stamina

from esra.core._config.ceilings import effective_response_modes, narrowed_limits
from esra.core._config.converter import load_part
from esra.core._fetch.service import DocumentFetcher
from esra.core._pipeline.scope import EffectiveScope, resolve_scope
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode, ProviderErrorCode
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    CapabilityLimits,
    ConfigSnapshot,
    Exposure,
    LimitCeilings,
    ResponseMode,
    SourceBinding,
    dump_snapshot,
    load_snapshot,
)
from esra.core.exceptions import ConfigurationError, SourceUnavailableError
from esra.core.fetch import Keyring
from esra.core.prompts import PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from esra.core.testing._invocations import audited
from tests.core.factories import (
    TENANT,
    make_capability,
    make_context,
    make_exposure,
    make_snapshot,
    make_source,
)

RESULTS = frozenset({ResponseMode.RESULTS})
ANSWERING = frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER})
ANSWER_ONLY = frozenset({ResponseMode.ANSWER})
CAPABILITY_LIMITS = CapabilityLimits(max_rows_per_query=50, max_total_queries=24)
ROWS = {
    f"m-s-{n}": [
        {"col_id": k, "col_title": f"Leave policy {n}.{k}", "col_body": "annual leave rules"}
        for k in range(1, 6)
    ]
    for n in (1, 2)
}


@pytest.fixture(autouse=True)
def _no_retry_backoff() -> Iterator[None]:
    # Retries still count (cap=True keeps each call's own attempts); only the waits go.
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _snapshot(
    *,
    modes: frozenset[ResponseMode] = ANSWERING,
    exposure: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
) -> ConfigSnapshot:
    bindings = [SourceBinding(s, BindingMode.MANDATORY) for s in ("s-1", "s-2")]
    capability = make_capability(bindings, response_modes=modes, limits=CAPABILITY_LIMITS)
    published = make_exposure(**(exposure or {}))
    return make_snapshot(
        [make_source("s-1", answer_permitted=True), make_source("s-2", answer_permitted=True)],
        capability=capability,
        exposure=published,
        access_policy=attrs.evolve(AccessPolicy.matching(published), **(policy or {})),
    )


async def _scope(snapshot: ConfigSnapshot) -> EffectiveScope:
    async with audited(make_context()) as invocation:
        return await resolve_scope(invocation, snapshot, health={})


def _retriever(
    snapshot: ConfigSnapshot,
) -> tuple[Retriever, FakeLanguageModel, dict[str, InMemorySearchProvider]]:
    model = FakeLanguageModel()
    providers = {"s-1": InMemorySearchProvider(ROWS), "s-2": InMemorySearchProvider(ROWS)}
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers=providers,
        model=model,
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )
    return retriever, model, providers


# --- limits ------------------------------------------------------------------------------------


def test_every_capability_limit_has_a_ceiling() -> None:
    """A limit added to the capability without a ceiling could never be narrowed."""
    assert [f.name for f in attrs.fields(LimitCeilings)] == [
        f.name for f in attrs.fields(CapabilityLimits)
    ]


@pytest.mark.parametrize(
    ("exposure", "policy", "rows", "queries"),
    [
        pytest.param({"max_rows_per_query": 5}, {}, 5, 24, id="exposure-narrows"),
        pytest.param({}, {"max_total_queries": 2}, 50, 2, id="policy-narrows"),
        pytest.param(
            {"max_rows_per_query": 9}, {"max_rows_per_query": 4}, 4, 24, id="smallest-wins"
        ),
        pytest.param(
            {"max_rows_per_query": 500}, {"max_total_queries": 99}, 50, 24, id="never-widens"
        ),
    ],
)
async def test_the_effective_limits_are_the_smallest_any_level_sets(
    exposure: dict[str, int], policy: dict[str, int], rows: int, queries: int
) -> None:
    snapshot = _snapshot(
        exposure={"limits": LimitCeilings(**exposure)},
        policy={"limits": LimitCeilings(**policy)},
    )
    scope = await _scope(snapshot)
    assert (scope.limits.max_rows_per_query, scope.limits.max_total_queries) == (rows, queries)
    # Limits no level narrows stay the capability's.
    assert scope.limits.retry_attempts == CAPABILITY_LIMITS.retry_attempts
    assert scope.capability.limits == CAPABILITY_LIMITS


async def test_a_search_runs_within_the_narrowed_limits() -> None:
    """Every stage reads the narrowed limits: the planner's row cap and the query cap."""
    snapshot = _snapshot(
        exposure={"limits": LimitCeilings(max_rows_per_query=3)},
        policy={"limits": LimitCeilings(max_total_queries=1)},
    )
    retriever, _, providers = _retriever(snapshot)
    await retriever.retrieve(make_context(), "annual leave")
    executed = [q for p in providers.values() for q in p.executed]
    assert len(executed) == 1
    assert all(q.row_limit <= 3 for q in executed)


async def test_a_fetch_runs_within_the_narrowed_limits() -> None:
    """The fetch path resolves the same scope: a policy allowing one attempt gets no retry."""
    keyring = Keyring.generate("k1")
    clock = FakeClock()
    config = InMemoryConfigRepository([_snapshot(exposure={"fetch_enabled": True})])
    provider = InMemorySearchProvider(ROWS)
    providers = {"s-1": provider, "s-2": InMemorySearchProvider({})}
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=config,
        providers=providers,
        model=FakeLanguageModel(),
        audit=audit,
        clock=clock,
        keyring=keyring,
        tenant_id=TENANT,
    )
    fetcher = DocumentFetcher(
        config=config,
        providers=providers,
        audit=audit,
        keyring=keyring,
        quota=InMemoryQuotaStore(clock),
        hourly_chars=100_000,
        clock=clock,
        executor=retriever.executor,
        tenant_id=TENANT,
    )
    response = await retriever.retrieve(make_context(), "annual leave")
    ref = next(r.document_ref for r in response.results if r.document_ref is not None)

    # One transient failure: the capability's three attempts ride it out...
    provider.fail_with, provider.fail_times = ProviderErrorCode.CONNECTION_REFUSED, 1
    assert (await fetcher.fetch(make_context(), ref)).text

    # ...but not once the access policy allows a single attempt.
    config.put(
        _snapshot(
            exposure={"fetch_enabled": True},
            policy={"limits": LimitCeilings(retry_attempts=1)},
        )
    )
    provider.fail_with, provider.fail_times = ProviderErrorCode.CONNECTION_REFUSED, 1
    with pytest.raises(SourceUnavailableError):
        await fetcher.fetch(make_context(), ref)


def test_narrowed_limits_without_ceilings_is_the_capabilitys() -> None:
    assert narrowed_limits(CAPABILITY_LIMITS, ()) == CAPABILITY_LIMITS
    assert narrowed_limits(CAPABILITY_LIMITS, (LimitCeilings(),)) == CAPABILITY_LIMITS


@pytest.mark.parametrize(
    "ceiling",
    [
        {"max_rows_per_query": 0},
        {"retry_attempts": -1},
        {"invocation_timeout_s": 0.0},
        {"result_cache_ttl_s": -1.0},
    ],
)
def test_a_ceiling_that_is_no_bound_is_refused(ceiling: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(ceiling))):
        LimitCeilings(**ceiling)


# --- response modes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "exposure", "policy", "effective"),
    [
        pytest.param(ANSWERING, None, None, ANSWERING, id="nothing-narrows"),
        pytest.param(ANSWERING, RESULTS, None, RESULTS, id="exposure-takes-answer-away"),
        pytest.param(ANSWERING, None, RESULTS, RESULTS, id="policy-takes-answer-away"),
        pytest.param(RESULTS, ANSWERING, ANSWERING, RESULTS, id="never-widens"),
    ],
)
async def test_the_effective_response_modes_are_those_every_level_allows(
    capability: frozenset[ResponseMode],
    exposure: frozenset[ResponseMode] | None,
    policy: frozenset[ResponseMode] | None,
    effective: frozenset[ResponseMode],
) -> None:
    snapshot = _snapshot(
        modes=capability,
        exposure={"response_modes": exposure},
        policy={"response_modes": policy},
    )
    assert (await _scope(snapshot)).response_modes == effective


@pytest.mark.parametrize(
    "level",
    [{"exposure": {"response_modes": RESULTS}}, {"policy": {"response_modes": RESULTS}}],
    ids=["exposure", "policy"],
)
async def test_an_answer_mode_taken_away_composes_no_answer(level: dict[str, Any]) -> None:
    """The capability allows answers, a narrower level does not: the model is never asked."""
    retriever, model, _ = _retriever(_snapshot(**level))
    response = await retriever.retrieve(make_context(), "annual leave")
    assert response.results
    assert response.answer is None
    assert model.prompts_for(PromptTask.ANSWER) == []
    # The control: with the capability's own modes the same search composes one.
    retriever, model, _ = _retriever(_snapshot())
    assert (await retriever.retrieve(make_context(), "annual leave")).answer is not None


@pytest.mark.parametrize(
    ("capability", "exposure", "policy"),
    [
        pytest.param(ANSWERING, ANSWER_ONLY, None, id="exposure-answer-only"),
        pytest.param(RESULTS, None, ANSWER_ONLY, id="disjoint"),
        pytest.param(ANSWERING, RESULTS, ANSWER_ONLY, id="exposure-and-policy-disjoint"),
        pytest.param(ANSWERING, frozenset(), None, id="exposure-allows-none"),
    ],
)
def test_levels_leaving_no_results_mode_are_refused_at_publication(
    capability: frozenset[ResponseMode],
    exposure: frozenset[ResponseMode] | None,
    policy: frozenset[ResponseMode] | None,
) -> None:
    """Fail closed: never serve results a level forbids, never widen to the capability's."""
    with pytest.raises(ConfigurationError, match="no results mode in common") as refused:
        _snapshot(
            modes=capability,
            exposure={"response_modes": exposure},
            policy={"response_modes": policy},
        )
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    with pytest.raises(ConfigurationError):
        effective_response_modes(capability, (exposure, policy))


def test_an_unpublished_exposure_may_hold_modes_it_could_not_serve() -> None:
    """Only a published tool is served; a draft is checked when it is published."""
    snapshot = _snapshot(exposure={"response_modes": ANSWER_ONLY, "published": False})
    assert snapshot.exposures[0].response_modes == ANSWER_ONLY
    with pytest.raises(ConfigurationError):
        attrs.evolve(snapshot, exposures=(attrs.evolve(snapshot.exposures[0], published=True),))


async def test_a_served_exposure_leaving_no_results_mode_fails_closed_at_resolution() -> None:
    """Defence in depth behind the snapshot's check: should such an exposure be served anyway,
    the invocation fails with the classified error before any source or model is touched."""
    snapshot = _snapshot()
    # Forced past the snapshot's check, as a future code path that forgot it would.
    object.__setattr__(snapshot.exposures[0], "response_modes", ANSWER_ONLY)
    retriever, model, providers = _retriever(snapshot)
    audit = InMemoryAuditSink()

    with pytest.raises(ConfigurationError) as failed:
        async with audited(make_context(), audit=audit) as invocation:
            await resolve_scope(invocation, snapshot, health={})
    assert failed.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    # The caller gets the fixed public message, never which level took the mode away.
    assert str(failed.value) == ConfigurationError.public_message
    [record] = audit.events(AuditEvent.SOURCES_RESOLVE)
    assert (record.outcome, record.reason) == ("failed", "ESRA_CONFIGURATION_INVALID")

    with pytest.raises(ConfigurationError):
        await retriever.retrieve(make_context(), "annual leave")
    assert model.prompts == []
    assert all(p.executed == [] for p in providers.values())


async def test_resolution_audits_the_narrowed_scope_like_any_other() -> None:
    audit = InMemoryAuditSink()
    snapshot = _snapshot(exposure={"response_modes": RESULTS})
    async with audited(make_context(), audit=audit) as invocation:
        await resolve_scope(invocation, snapshot, health={})
    [record] = audit.events(AuditEvent.SOURCES_RESOLVE)
    assert record.outcome == "ok"


# --- configuration documents -------------------------------------------------------------------


def test_a_snapshot_narrowing_nothing_dumps_without_the_new_keys() -> None:
    """Stored and exported documents of configurations that narrow nothing do not change."""
    document = dump_snapshot(_snapshot())
    for part in (*document["exposures"], *document["access_policies"]):
        assert "limits" not in part
        assert "response_modes" not in part
    assert load_snapshot(document) == _snapshot()


def test_narrowing_levels_load_and_dump_only_what_they_set() -> None:
    snapshot = _snapshot(
        exposure={"response_modes": RESULTS, "limits": LimitCeilings(max_rows_per_query=5)},
        policy={"limits": LimitCeilings(invocation_timeout_s=3.0)},
    )
    document = dump_snapshot(snapshot)
    [exposure] = document["exposures"]
    [policy] = document["access_policies"]
    assert exposure["response_modes"] == ["results"]
    assert exposure["limits"] == {"max_rows_per_query": 5}
    assert policy["limits"] == {"invocation_timeout_s": 3.0}
    assert "response_modes" not in policy
    assert load_snapshot(document) == snapshot


def test_a_document_with_a_ceiling_that_is_no_bound_is_refused() -> None:
    document = dump_snapshot(_snapshot())
    document["exposures"][0]["limits"] = {"max_total_queries": 0}
    with pytest.raises(ConfigurationError):
        load_snapshot(document)


def test_exposure_defaults_narrow_nothing() -> None:
    exposure = Exposure(id="e", tenant_id=TENANT, slug="s")
    assert exposure.response_modes is None
    assert exposure.limits == LimitCeilings()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_rows_per_query", 0),
        ("max_total_queries", -1),
        ("retry_attempts", 0),
        ("source_concurrency", 0),
        ("attempt_timeout_s", 0.0),
        ("invocation_timeout_s", -5.0),
    ],
)
def test_a_capability_limit_of_zero_or_less_is_refused(field: str, value: float) -> None:
    """As a ceiling's is: a bound of no rows, no attempts or no time has no meaning (a
    hostile review saw such values saved through the admin API)."""
    with pytest.raises(ConfigurationError, match="limits is not valid"):
        load_part({field: value}, CapabilityLimits, what="limits")
