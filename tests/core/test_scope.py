"""Tests for esra.core._pipeline.scope: the four-level intersection, health, exposure checks."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._audit.record import AuditRecord
from esra.core._context import InvocationContext
from esra.core._pipeline.scope import EffectiveScope, resolve_scope
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.config import (
    BindingMode,
    CapabilityLimits,
    ConfigSnapshot,
    LifecycleState,
    ResponseMode,
    Source,
    SourceBinding,
    SourceHealth,
    SourcePolicy,
)
from esra.core.exceptions import ExposureNotFoundError, NoSourcesAvailableError
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing._invocations import audited
from tests.core.factories import (
    CLIENT_APP,
    make_capability,
    make_context,
    make_exposure,
    make_mapping,
    make_snapshot,
    make_source,
)

HIDDEN = "s-hidden"
HIDDEN_NAME = "Source s-hidden"


async def _resolve(
    snapshot: ConfigSnapshot,
    ctx: InvocationContext | None = None,
    *,
    health: dict[str, SourceHealth] | None = None,
    audit: InMemoryAuditSink | None = None,
) -> EffectiveScope:
    async with audited(ctx or make_context(), audit=audit) as invocation:
        return await resolve_scope(invocation, snapshot, health=health or {})


def _ids(scope: EffectiveScope) -> list[str]:
    return [s.source.id for s in scope.sources]


def _assert_never_named(records: list[AuditRecord], *texts: str) -> None:
    for record in records:
        for text in texts:
            assert text not in repr(record)


async def test_resolves_every_admitted_source_in_binding_order() -> None:
    """With nothing excluded, the scope holds every bound source in binding order with its
    mode, mappings, health, limits, response modes and the snapshot version."""
    limits = CapabilityLimits(max_rows_per_query=7)
    capability = make_capability(
        [
            SourceBinding("s-2", BindingMode.MANDATORY),
            SourceBinding("s-1", BindingMode.OPTIONAL),
            SourceBinding("s-3", BindingMode.POLICY_FORCED),
        ],
        limits=limits,
        response_modes=frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER}),
    )
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2"), make_source("s-3")],
        capability=capability,
        version="v7",
    )
    scope = await _resolve(snapshot, health={"s-1": SourceHealth.DEGRADED})
    assert _ids(scope) == ["s-2", "s-1", "s-3"]
    assert [s.mode for s in scope.sources] == [
        BindingMode.MANDATORY,
        BindingMode.OPTIONAL,
        BindingMode.POLICY_FORCED,
    ]
    assert [s.source.id for s in scope.forced()] == ["s-2", "s-3"]
    assert [s.source.id for s in scope.optional()] == ["s-1"]
    assert scope.by_id("s-1") is scope.sources[1]
    assert scope.sources[1].health is SourceHealth.DEGRADED
    assert scope.sources[0].mappings == snapshot.mappings_of("s-2")
    assert scope.limits == limits
    assert scope.response_modes == {ResponseMode.RESULTS, ResponseMode.ANSWER}
    assert scope.config_version == "v7"
    assert scope.exposure == snapshot.exposures[0]
    assert scope.capability == capability


def _exclusions() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per level: (snapshot changes for the hidden source, context changes)."""
    return {
        "policy_lifecycle_draft": ({"lifecycle": LifecycleState.DRAFT}, {}),
        "policy_lifecycle_deprecated": ({"lifecycle": LifecycleState.DEPRECATED}, {}),
        "policy_lifecycle_retired": ({"lifecycle": LifecycleState.RETIRED}, {}),
        "policy_client_app": (
            {"policy": SourcePolicy(allowed_client_apps=frozenset({"other-app"}))},
            {},
        ),
        "capability_binding": ({"unbound": True}, {}),
        "exposure_subset": ({"subset": True}, {}),
        "runtime_authorization": ({}, {"authorized_source_ids": ["s-1"]}),
    }


@pytest.mark.parametrize("level", list(_exclusions()))
async def test_a_source_excluded_at_one_level_alone_disappears(level: str) -> None:
    """Excluding a source at exactly one of the four levels removes it from scope, and the
    audit record neither names it nor lists its id."""
    source_changes, ctx_changes = _exclusions()[level]
    unbound = source_changes.pop("unbound", False)
    subset = source_changes.pop("subset", False)
    hidden = make_source(HIDDEN, **source_changes)
    bindings = ["s-1"] if unbound else ["s-1", HIDDEN]
    exposure = make_exposure(source_subset=frozenset({"s-1"}) if subset else None)
    snapshot = make_snapshot(
        [make_source("s-1"), hidden],
        capability=make_capability(bindings),
        exposure=exposure,
    )
    audit = InMemoryAuditSink()
    scope = await _resolve(snapshot, make_context(**ctx_changes), audit=audit)
    assert _ids(scope) == ["s-1"]
    assert scope.by_id(HIDDEN) is None
    _assert_never_named(audit.records, HIDDEN, HIDDEN_NAME)
    [record] = audit.events(AuditEvent.SOURCES_RESOLVE)
    assert record.dimensions["effective_source_ids"] == ("s-1",)


async def test_policy_admits_a_listed_client_app() -> None:
    """A source policy that lists the caller's client application admits the source."""
    source = make_source("s-1", policy=SourcePolicy(allowed_client_apps=frozenset({CLIENT_APP})))
    assert _ids(await _resolve(make_snapshot([source]))) == ["s-1"]


async def test_runtime_authorization_narrows_but_never_widens() -> None:
    """Runtime authorization naming an unbound source does not bring it into scope."""
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2")], capability=make_capability(["s-1"])
    )
    scope = await _resolve(snapshot, make_context(authorized_source_ids=["s-1", "s-2"]))
    assert _ids(scope) == ["s-1"]


async def test_unavailable_health_from_the_report_drops_the_source() -> None:
    """A source the health report marks UNAVAILABLE is dropped."""
    snapshot = make_snapshot([make_source("s-1"), make_source("s-2")])
    scope = await _resolve(snapshot, health={"s-2": SourceHealth.UNAVAILABLE})
    assert _ids(scope) == ["s-1"]


async def test_configured_health_applies_when_the_report_is_silent() -> None:
    """A source absent from the health report uses its configured health."""
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2", health=SourceHealth.UNAVAILABLE)]
    )
    assert _ids(await _resolve(snapshot)) == ["s-1"]


async def test_reported_health_overrides_configured_health() -> None:
    """A reported HEALTHY state wins over a configured UNAVAILABLE one."""
    snapshot = make_snapshot([make_source("s-1", health=SourceHealth.UNAVAILABLE)])
    scope = await _resolve(snapshot, health={"s-1": SourceHealth.HEALTHY})
    assert _ids(scope) == ["s-1"]
    assert scope.sources[0].health is SourceHealth.HEALTHY


async def test_a_source_without_mappings_is_dropped() -> None:
    """A source with no mapping has nothing to search and is dropped."""
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2")],
        mappings=[make_mapping("m-1", source_id="s-1")],
    )
    assert _ids(await _resolve(snapshot)) == ["s-1"]


async def test_audit_counts_each_level_as_a_funnel() -> None:
    """The resolve record counts what each level admitted, then health, then the effective set."""
    sources = [
        make_source("s-1"),
        make_source("s-2", lifecycle=LifecycleState.DRAFT),  # fails level 1
        make_source("s-3"),  # not bound: fails level 2
        make_source("s-4"),  # outside the subset: fails level 3
        make_source("s-5"),  # not authorized: fails level 4
        make_source("s-6"),  # unavailable
        make_source("s-7"),
    ]
    snapshot = make_snapshot(
        sources,
        capability=make_capability(["s-1", "s-2", "s-4", "s-5", "s-6", "s-7"]),
        exposure=make_exposure(source_subset=frozenset({"s-1", "s-2", "s-5", "s-6", "s-7"})),
    )
    audit = InMemoryAuditSink()
    ctx = make_context(authorized_source_ids=["s-1", "s-2", "s-3", "s-4", "s-6", "s-7"])
    await _resolve(snapshot, ctx, health={"s-6": SourceHealth.UNAVAILABLE}, audit=audit)
    [record] = audit.events(AuditEvent.SOURCES_RESOLVE)
    assert record.outcome == "ok"
    assert record.tenant_id == ctx.tenant_id
    assert record.correlation_id == ctx.correlation_id
    assert {k: v for k, v in record.dimensions.items() if k.startswith("admitted_")} == {
        "admitted_source_policy": 6,
        "admitted_capability_binding": 5,
        "admitted_exposure_subset": 4,
        "admitted_runtime_authorization": 3,
        "admitted_health": 2,
    }
    assert record.dimensions["effective_source_ids"] == ("s-1", "s-7")
    _assert_never_named(audit.records, "s-2", "s-3", "s-4", "s-5", "s-6")


async def test_empty_scope_raises_and_is_audited() -> None:
    """An empty effective set raises NoSourcesAvailableError after a failed resolve record."""
    snapshot = make_snapshot([make_source(HIDDEN)])
    audit = InMemoryAuditSink()
    with pytest.raises(NoSourcesAvailableError):
        await _resolve(snapshot, make_context(authorized_source_ids=[]), audit=audit)
    [record] = audit.events(AuditEvent.SOURCES_RESOLVE)
    assert record.outcome == "failed"
    assert record.reason == ErrorCode.ESRA_NO_SOURCES_AVAILABLE
    assert record.dimensions["effective_source_ids"] == ()
    _assert_never_named(audit.records, HIDDEN, HIDDEN_NAME)


def _exposure_failures() -> dict[str, tuple[ConfigSnapshot, InvocationContext]]:
    sources = [make_source("s-1")]
    other_tenant = make_snapshot(
        [make_source("s-1", tenant_id="tenant-b")],
        tenant_id="tenant-b",
        mappings=[make_mapping("m-1", source_id="s-1", tenant_id="tenant-b")],
    )
    return {
        "other_tenant": (other_tenant, make_context()),
        "unknown_slug": (make_snapshot(sources), make_context(slug="no_such_tool")),
        "unpublished": (
            make_snapshot(sources, exposure=make_exposure(published=False)),
            make_context(),
        ),
        "outside_audience": (make_snapshot(sources), make_context(client_app_id="other-app")),
    }


@pytest.mark.parametrize("case", list(_exposure_failures()))
async def test_exposure_failures_are_one_indistinguishable_error(case: str) -> None:
    """Another tenant's snapshot, an unknown slug, an unpublished exposure and a client app
    outside the audience all raise the same ExposureNotFoundError after an identical denial
    record that names no source."""
    snapshot, ctx = _exposure_failures()[case]
    audit = InMemoryAuditSink()
    with pytest.raises(ExposureNotFoundError) as raised:
        await _resolve(snapshot, ctx, audit=audit)
    assert str(raised.value) == str(ExposureNotFoundError())
    [record] = audit.records
    expected = AuditRecord(
        event=AuditEvent.SOURCES_RESOLVE,
        tenant_id=ctx.tenant_id,
        correlation_id=ctx.correlation_id,
        at=FakeClock().now(),
        outcome="denied",
        reason=ErrorCode.ESRA_EXPOSURE_NOT_FOUND,
    )
    assert record == expected


async def test_the_denial_record_carries_the_callers_tenant() -> None:
    """A denial for another tenant's snapshot is recorded under the caller's tenant only."""
    snapshot, ctx = _exposure_failures()["other_tenant"]
    audit = InMemoryAuditSink()
    with pytest.raises(ExposureNotFoundError):
        await _resolve(snapshot, ctx, audit=audit)
    assert [r.tenant_id for r in audit.records] == [ctx.tenant_id]
    assert "tenant-b" not in repr(audit.records)


_IDS = [f"s-{i}" for i in range(6)]


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sets(st.sampled_from(_IDS)),
    bound=st.sets(st.sampled_from(_IDS)),
    subset=st.none() | st.sets(st.sampled_from(_IDS)).map(frozenset),
    authorized=st.none() | st.sets(st.sampled_from(_IDS)).map(frozenset),
    unavailable=st.sets(st.sampled_from(_IDS)),
)
async def test_scope_is_exactly_the_intersection(
    policy: set[str],
    bound: set[str],
    subset: frozenset[str] | None,
    authorized: frozenset[str] | None,
    unavailable: set[str],
) -> None:
    """For any combination of levels, the scope is exactly policy ∩ binding ∩ subset ∩
    authorization minus unavailable sources, in binding order (or empty → error)."""
    sources: list[Source] = [
        make_source(i, lifecycle=LifecycleState.ACTIVE if i in policy else LifecycleState.RETIRED)
        for i in _IDS
    ]
    bindings = [i for i in reversed(_IDS) if i in bound]
    snapshot = make_snapshot(
        sources,
        capability=make_capability(bindings),
        exposure=make_exposure(source_subset=subset),
    )
    ctx = make_context(authorized_source_ids=authorized)
    expected = [
        i
        for i in bindings
        if i in policy
        and (subset is None or i in subset)
        and (authorized is None or i in authorized)
        and i not in unavailable
    ]
    health = dict.fromkeys(unavailable, SourceHealth.UNAVAILABLE)
    if not expected:
        with pytest.raises(NoSourcesAvailableError):
            await _resolve(snapshot, ctx, health=health)
        return
    scope = await _resolve(snapshot, ctx, health=health)
    assert _ids(scope) == expected
    assert attrs.asdict(scope.exposure) == attrs.asdict(snapshot.exposures[0])
