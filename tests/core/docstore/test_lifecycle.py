"""The store lifecycle: enable, background initialisation, failures with remedies, roles."""

from __future__ import annotations

import asyncio

import pytest

from esra.core._admin.roles import NotPermittedError
from esra.core._docstore.lifecycle import (
    StoreInitialisationError,
    StoreInitialiser,
    StoreLifecycle,
    StoreNotReadyError,
    StoreStatus,
)
from esra.core._docstore.management import DATA_MANAGE, DATA_READ, Operator
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink

TENANT = "tenant-a"
READER = Operator(subject="reader", tenant_id=TENANT, roles=frozenset({DATA_READ}))
MANAGER = Operator(subject="manager", tenant_id=TENANT, roles=frozenset({DATA_MANAGE}))
FOREIGN = Operator(subject="other", tenant_id="tenant-b", roles=frozenset({DATA_MANAGE}))


def _lifecycle(initialiser: StoreInitialiser, audit: InMemoryAuditSink) -> StoreLifecycle:
    return StoreLifecycle(TENANT, initialiser, audit=audit, clock=FakeClock())


async def test_initialisation_runs_in_the_background_and_is_polled() -> None:
    """``initialise`` returns Initializing at once; the state turns Ready when the job ends."""
    gate = asyncio.Event()
    audit = InMemoryAuditSink()

    async def slow_ddl() -> None:
        await gate.wait()

    lifecycle = _lifecycle(slow_ddl, audit)
    assert (await lifecycle.state(READER)).status is StoreStatus.DISABLED
    with pytest.raises(StoreNotReadyError):
        lifecycle.require_ready()
    await lifecycle.enable(MANAGER)
    started = await lifecycle.initialise(MANAGER)
    assert started.status is StoreStatus.INITIALIZING
    with pytest.raises(StoreNotReadyError) as twice:
        await lifecycle.initialise(MANAGER)
    assert twice.value.status is StoreStatus.INITIALIZING
    gate.set()
    assert (await lifecycle.wait()).status is StoreStatus.READY
    lifecycle.require_ready()
    outcomes = [r.outcome for r in audit.events(AuditEvent.STORE_INITIALISE)]
    assert outcomes == ["started", "rejected", "ok"]


async def test_a_classified_failure_carries_its_remedy_and_may_be_retried() -> None:
    """A failed initialisation shows reason and remedy; initialising again can succeed."""
    attempts: list[int] = []
    audit = InMemoryAuditSink()

    async def flaky() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise StoreInitialisationError("principal_is_superuser", "Use a dedicated role.")

    lifecycle = _lifecycle(flaky, audit)
    await lifecycle.enable(MANAGER)
    await lifecycle.initialise(MANAGER)
    failed = await lifecycle.wait()
    assert (failed.status, failed.failure, failed.remedy) == (
        StoreStatus.FAILED,
        "principal_is_superuser",
        "Use a dedicated role.",
    )
    await lifecycle.initialise(MANAGER)
    assert (await lifecycle.wait()).status is StoreStatus.READY


async def test_an_unexpected_error_fails_closed_without_its_text() -> None:
    """A bug in the initialiser is a Failed store with a generic remedy, never its message."""

    async def broken() -> None:
        msg = "password=hunter2 rejected by db.internal"
        raise RuntimeError(msg)

    lifecycle = _lifecycle(broken, InMemoryAuditSink())
    await lifecycle.enable(MANAGER)
    await lifecycle.initialise(MANAGER)
    state = await lifecycle.wait()
    assert (state.status, state.failure) == (StoreStatus.FAILED, "unexpected_error")
    assert "hunter2" not in (state.remedy or "")


async def test_only_managers_of_the_tenant_act_and_denials_are_audited() -> None:
    """A reader and another tenant's manager cannot enable or initialise; both are recorded."""
    audit = InMemoryAuditSink()

    async def nothing() -> None:
        return None

    lifecycle = _lifecycle(nothing, audit)
    for operator in (READER, FOREIGN):
        with pytest.raises(NotPermittedError):
            await lifecycle.enable(operator)
        with pytest.raises(NotPermittedError):
            await lifecycle.initialise(operator)
    with pytest.raises(NotPermittedError):
        await lifecycle.state(FOREIGN)
    assert lifecycle.current.status is StoreStatus.DISABLED
    denied = [r.dimensions["operator"] for r in audit.records if r.outcome == "denied"]
    assert denied == ["reader", "reader", "other", "other"]
    assert {r.tenant_id for r in audit.records} == {TENANT}
