"""A source dropped for health is reported, and probing it never multiplies an outage.

Regression for a mandatory source on a dead database answering ``complete`` with no warning,
and for an outage whose health probes made every concurrent caller wait in turn.
"""

from __future__ import annotations

import asyncio

import attrs
import pytest

from esra.core._pipeline.health import SourceHealthMonitor
from esra.core._pipeline.scope import resolve_scope
from esra.core._response import ResponseStatus
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode, WarningCode
from esra.core.config import BindingMode, CapabilityLimits, SourceBinding, SourceHealth
from esra.core.exceptions import NoSourcesAvailableError
from esra.core.prompts import PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from esra.core.testing._invocations import audited
from tests.core.factories import make_capability, make_context, make_snapshot, make_source

ROWS = {
    f"m-s-{n}": [{"col_id": n, "col_title": f"Leave policy {n}", "col_body": "Leave rules"}]
    for n in (1, 2, 3)
}
FORCED = (BindingMode.MANDATORY, BindingMode.POLICY_FORCED)
# Only a safety net against a hang; nothing here depends on how long anything takes.
SAFETY_S = 30.0


class GatedProvider(InMemorySearchProvider):
    """Answers ``health()`` only once ``gate`` is set, counting the calls and cancellations."""

    def __init__(self, state: SourceHealth, *, swallow_cancel: bool = False) -> None:
        super().__init__(ROWS)
        self.state = state
        self.gate = asyncio.Event()
        self.released = asyncio.Event()
        self.calls = 0
        self.cancelled = 0
        self._swallow_cancel = swallow_cancel

    async def health(self) -> SourceHealth:
        self.calls += 1
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            if not self._swallow_cancel:
                raise
            # A provider that ignores cancellation: it answers only when the test lets it.
            await self.released.wait()
        return self.state


def _retriever(
    bindings: list[SourceBinding],
    providers: dict[str, InMemorySearchProvider],
    *,
    clock: FakeClock | None = None,
    probe_timeout_s: float = 2.0,
) -> tuple[Retriever, InMemoryAuditSink]:
    ids = [b.source_id for b in bindings]
    snapshot = make_snapshot(
        [make_source(source_id) for source_id in ids], capability=make_capability(bindings)
    )
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers=providers,
        model=FakeLanguageModel(),
        audit=audit,
        clock=clock or FakeClock(),
        health_probe_timeout_s=probe_timeout_s,
    )
    return retriever, audit


def _down() -> InMemorySearchProvider:
    return InMemorySearchProvider(ROWS, health=SourceHealth.UNAVAILABLE)


def _up() -> InMemorySearchProvider:
    return InMemorySearchProvider(ROWS)


@pytest.mark.parametrize("mode", FORCED)
async def test_a_forced_source_that_is_down_degrades_the_response_with_a_warning(
    mode: BindingMode,
) -> None:
    """The dead source is named by its business name, and the others still answer."""
    down, up = _down(), _up()
    retriever, audit = _retriever(
        [SourceBinding("s-1", mode), SourceBinding("s-2")], {"s-1": down, "s-2": up}
    )
    response = await retriever.retrieve(make_context(), "leave")
    assert response.status is ResponseStatus.DEGRADED
    assert [(w.code, w.message) for w in response.warnings] == [
        (
            WarningCode.ESRA_SOURCE_UNAVAILABLE,
            "Source 'Source s-1' is unavailable and was not searched.",
        )
    ]
    assert down.executed == []
    assert {r.source for r in response.results} == {"Source s-2"}
    retrieve = [r for r in audit.records if r.event is AuditEvent.RETRIEVE]
    assert retrieve[-1].outcome == "degraded"
    assert retrieve[-1].dimensions["warnings"] == (WarningCode.ESRA_SOURCE_UNAVAILABLE.value,)


async def test_a_dead_source_outside_the_callers_authorization_is_never_named() -> None:
    """Only sources the caller is entitled to are reported; another's stays invisible."""
    retriever, _ = _retriever(
        [
            SourceBinding("s-1", BindingMode.MANDATORY),
            SourceBinding("s-2", BindingMode.MANDATORY),
            SourceBinding("s-3"),
        ],
        {"s-1": _down(), "s-2": _down(), "s-3": _up()},
    )
    ctx = make_context(authorized_source_ids={"s-1", "s-3"})
    response = await retriever.retrieve(ctx, "leave")
    assert response.status is ResponseStatus.DEGRADED
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_SOURCE_UNAVAILABLE]
    text = " ".join(w.message for w in response.warnings)
    assert "s-1" in text
    assert "s-2" not in text


async def test_an_optional_source_that_is_down_adds_no_warning() -> None:
    """The model is never offered it, so nothing chose it: the response stays complete."""
    retriever, _ = _retriever(
        [SourceBinding("s-1"), SourceBinding("s-2")], {"s-1": _down(), "s-2": _up()}
    )
    response = await retriever.retrieve(make_context(), "leave")
    assert response.status is ResponseStatus.COMPLETE
    assert response.warnings == ()


async def test_every_source_down_is_still_no_sources_available() -> None:
    """With nothing left to search the call fails as before, mandatory or not."""
    retriever, _ = _retriever(
        [SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2")],
        {"s-1": _down(), "s-2": _down()},
    )
    with pytest.raises(NoSourcesAvailableError) as raised:
        await retriever.retrieve(make_context(), "leave")
    assert raised.value.code is ErrorCode.ESRA_NO_SOURCES_AVAILABLE


async def test_the_deadline_response_still_reports_the_dead_source() -> None:
    """A call that runs out of time names the forced source it never searched as well."""
    capability = attrs.evolve(
        make_capability([SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2")]),
        limits=CapabilityLimits(invocation_timeout_s=0.05, attempt_timeout_s=0.05),
    )
    snapshot = make_snapshot([make_source("s-1"), make_source("s-2")], capability=capability)
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": _down(), "s-2": _up()},
        model=FakeLanguageModel(stalled={PromptTask.SELECT_SOURCES}),
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )
    async with asyncio.timeout(SAFETY_S):
        response = await retriever.retrieve(make_context(), "leave")
    assert response.results == ()
    assert [w.code for w in response.warnings] == [
        WarningCode.ESRA_SOURCE_UNAVAILABLE,
        WarningCode.ESRA_INVOCATION_DEADLINE,
    ]


async def test_scope_resolution_carries_the_warning_for_forced_sources_only() -> None:
    """The scope holds one warning per entitled forced source dropped for health."""
    bindings = [
        SourceBinding("s-1", BindingMode.MANDATORY),
        SourceBinding("s-2", BindingMode.POLICY_FORCED),
        SourceBinding("s-3"),
    ]
    snapshot = make_snapshot(
        [make_source("s-1"), make_source("s-2"), make_source("s-3", name="Hidden optional")],
        capability=make_capability(bindings),
    )
    async with audited(make_context()) as invocation:
        scope = await resolve_scope(
            invocation,
            snapshot,
            health={
                "s-1": SourceHealth.UNAVAILABLE,
                "s-2": SourceHealth.HEALTHY,
                "s-3": SourceHealth.UNAVAILABLE,
            },
        )
    assert [s.source.id for s in scope.sources] == ["s-2"]
    assert [w.message for w in scope.warnings] == [
        "Source 'Source s-1' is unavailable and was not searched."
    ]


async def test_concurrent_invocations_share_one_probe_per_source() -> None:
    """Thirty-two callers arriving during a probe all wait for that one probe."""
    dead, live = GatedProvider(SourceHealth.UNAVAILABLE), GatedProvider(SourceHealth.HEALTHY)
    retriever, _ = _retriever(
        [SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2")],
        {"s-1": dead, "s-2": live},
    )
    async with asyncio.timeout(SAFETY_S):
        calls = [
            asyncio.create_task(retriever.retrieve(make_context(correlation_id=f"c-{n}"), "leave"))
            for n in range(32)
        ]
        while dead.calls == 0 or live.calls == 0:
            await asyncio.sleep(0)
        for _ in range(10):  # let every caller reach its health check
            await asyncio.sleep(0)
        dead.gate.set()
        live.gate.set()
        responses = await asyncio.gather(*calls)
    assert (dead.calls, live.calls) == (1, 1)
    assert all(r.status is ResponseStatus.DEGRADED for r in responses)
    assert all(
        [w.code for w in r.warnings] == [WarningCode.ESRA_SOURCE_UNAVAILABLE] for r in responses
    )


async def test_a_probe_is_reused_for_its_ttl_then_repeated_once() -> None:
    """Within the TTL nobody probes; after it, the next callers share one new probe."""
    clock = FakeClock()
    provider = GatedProvider(SourceHealth.HEALTHY)
    provider.gate.set()
    monitor = SourceHealthMonitor({"s-1": provider}, clock=clock, ttl_s=15.0, timeout_s=5.0)
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.HEALTHY}
    clock.advance(14.0)
    await monitor.health_of(["s-1"])
    assert provider.calls == 1
    clock.advance(1.0)
    provider.gate.clear()
    async with asyncio.timeout(SAFETY_S):
        waiting = [asyncio.create_task(monitor.health_of(["s-1"])) for _ in range(8)]
        while provider.calls == 1:
            await asyncio.sleep(0)
        for _ in range(10):
            await asyncio.sleep(0)
        provider.gate.set()
        await asyncio.gather(*waiting)
    assert provider.calls == 2


async def test_a_probe_that_never_answers_counts_as_unavailable() -> None:
    """The probe is bounded by the configured timeout and then cancelled."""
    hung = GatedProvider(SourceHealth.HEALTHY)
    retriever, _ = _retriever(
        [SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2")],
        {"s-1": hung, "s-2": _up()},
        probe_timeout_s=0.05,
    )
    async with asyncio.timeout(SAFETY_S):
        response = await retriever.retrieve(make_context(), "leave")
        while hung.cancelled == 0:
            await asyncio.sleep(0)
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_SOURCE_UNAVAILABLE]
    assert hung.calls == 1
    assert not hung.gate.is_set()


async def test_a_probe_that_ignores_cancellation_is_still_bounded() -> None:
    """A provider that swallows the cancellation cannot hold the invocation."""
    stubborn = GatedProvider(SourceHealth.HEALTHY, swallow_cancel=True)
    retriever, _ = _retriever(
        [SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2")],
        {"s-1": stubborn, "s-2": _up()},
        probe_timeout_s=0.05,
    )
    async with asyncio.timeout(SAFETY_S):
        response = await retriever.retrieve(make_context(), "leave")
    assert stubborn.cancelled == 1
    assert not stubborn.released.is_set()
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_SOURCE_UNAVAILABLE]
    stubborn.released.set()  # let the abandoned check end before the loop closes
    await asyncio.sleep(0)


async def test_a_slow_probe_does_not_hold_back_another_source() -> None:
    """Sources are probed concurrently: the second is asked while the first still hangs."""
    slow, fast = GatedProvider(SourceHealth.HEALTHY), GatedProvider(SourceHealth.HEALTHY)
    fast.gate.set()
    monitor = SourceHealthMonitor({"s-1": slow, "s-2": fast}, clock=FakeClock(), timeout_s=5.0)
    async with asyncio.timeout(SAFETY_S):
        asked = asyncio.create_task(monitor.health_of(["s-1", "s-2"]))
        while fast.calls == 0:
            await asyncio.sleep(0)
        assert slow.calls == 1
        assert not asked.done()
        slow.gate.set()
        assert await asked == {"s-1": SourceHealth.HEALTHY, "s-2": SourceHealth.HEALTHY}


async def test_a_caller_giving_up_does_not_cancel_the_shared_probe() -> None:
    """One cancelled invocation leaves the probe running for everyone else waiting on it."""
    provider = GatedProvider(SourceHealth.HEALTHY)
    monitor = SourceHealthMonitor({"s-1": provider}, clock=FakeClock(), timeout_s=5.0)
    async with asyncio.timeout(SAFETY_S):
        first = asyncio.create_task(monitor.health_of(["s-1"]))
        second = asyncio.create_task(monitor.health_of(["s-1"]))
        while provider.calls == 0:
            await asyncio.sleep(0)
        first.cancel()
        for _ in range(5):
            await asyncio.sleep(0)
        provider.gate.set()
        assert await second == {"s-1": SourceHealth.HEALTHY}
    assert first.cancelled()
    assert (provider.calls, provider.cancelled) == (1, 0)


@pytest.mark.parametrize("failure", ["raises", "wrong type", "no provider"])
async def test_a_broken_health_check_fails_closed(failure: str) -> None:
    """Anything but a SourceHealth answer is UNAVAILABLE."""

    class Broken(InMemorySearchProvider):
        async def health(self) -> SourceHealth:
            if failure == "raises":
                raise OSError("connection refused")
            return "healthy"  # type: ignore[return-value]

    providers = {} if failure == "no provider" else {"s-1": Broken(ROWS)}
    monitor = SourceHealthMonitor(providers, clock=FakeClock())
    assert await monitor.health_of(["s-1"]) == {"s-1": SourceHealth.UNAVAILABLE}
