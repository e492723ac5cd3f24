"""A saved administrative change is never left without its audit record.

The chain used to save a change and only then hand its record to the audit sink: a sink
failing (or a process dying) in between left the change applied and the record nowhere but
a log line. The record is now saved with the change, in the workspace store's audit outbox,
and forwarded from there — after each change, and by a host at its start.
"""

from __future__ import annotations

import pytest

from esra.core._audit.batching import AuditUnavailableError
from esra.core._audit.record import AuditRecord
from esra.core.admin import (
    AdminWorkspace,
    ConfigConflictError,
    InMemoryWorkspaceStore,
    NotPermittedError,
    Role,
    forward_audit_outbox,
)
from esra.core.codes import AuditEvent
from tests.core.admin.test_audit_before_effect import (
    PUBLISHER,
    SECURITY,
    SaveHookStore,
    SwitchableSink,
    _bound,
    _served_elsewhere,
)
from tests.core.admin.test_chain import SECRET_REF, SECRET_VALUE, Admin, holder
from tests.core.factories import SLUG, TENANT, make_exposure

pytestmark = pytest.mark.asyncio


def _published(sink: SwitchableSink) -> list[AuditRecord]:
    return [r for r in sink.records if r.event is AuditEvent.ADMIN_EXPOSURE_PUBLISH]


async def publish_while_the_sink_fails_after_the_save() -> tuple[
    Admin, SaveHookStore, SwitchableSink, AdminWorkspace
]:
    """Publish a bound exposure while the audit sink starts refusing right after the save:
    the change is made and answered as made, its record held. The sink stays down."""
    sink = SwitchableSink()
    store = SaveHookStore()
    h = Admin(store=store, audit=sink)  # type: ignore[arg-type]
    await _bound(h)

    def audit_dies() -> None:
        sink.up = False

    store.after_save = audit_dies
    updated = await h.exposures.publish(PUBLISHER, TENANT, SLUG)
    store.after_save = None
    return h, store, sink, updated


async def test_a_publish_whose_record_the_sink_refused_after_the_save_is_still_recorded() -> None:
    # Before the outbox the publish raised here and its record went to a log line only.
    h, _store, sink, _updated = await publish_while_the_sink_fails_after_the_save()
    assert await _served_elsewhere(h)  # the change is applied ...
    assert _published(sink) == []

    sink.up = True
    exposure = make_exposure(tenant_id=TENANT, published=False, source_subset=frozenset({"s-1"}))
    await h.exposures.bind_exposure(PUBLISHER, TENANT, exposure)  # the next change

    # ... so its record reaches the sink, once.
    (record,) = _published(sink)
    assert (record.outcome, record.tenant_id) == ("ok", TENANT)
    assert record.dimensions["version"] == (await h.store.published_versions())[TENANT]


async def test_the_change_is_answered_as_made_and_its_record_held_while_the_sink_refuses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _h, store, sink, updated = await publish_while_the_sink_fails_after_the_save()

    (held,) = await store.pending_audit()
    assert (held.event, held.outcome) == (AuditEvent.ADMIN_EXPOSURE_PUBLISH, "ok")
    assert held.dimensions["version"] == updated.version
    assert any("held in the state database" in r.getMessage() for r in caplog.records)

    sink.up = True
    assert await forward_audit_outbox(store, sink) == 1
    assert _published(sink) == [held]
    assert await store.pending_audit() == []
    assert await forward_audit_outbox(store, sink) == 0  # delivered once, then settled


async def test_a_delivered_record_leaves_nothing_held() -> None:
    h = Admin()
    await h.secrets.put_secret(SECURITY, TENANT, SECRET_REF, SECRET_VALUE)

    assert await h.store.pending_audit() == []
    (record,) = h.audit.events(AuditEvent.ADMIN_SECRET_WRITE)
    assert (record.outcome, record.dimensions["version"]) == ("ok", 1)


async def test_a_refused_or_conflicting_change_holds_no_record() -> None:
    h = Admin()
    with pytest.raises(NotPermittedError):
        await h.secrets.put_secret(holder(Role.ESRA_DATA_READ), TENANT, SECRET_REF, "v")
    await h.secrets.put_secret(SECURITY, TENANT, SECRET_REF, SECRET_VALUE)
    with pytest.raises(ConfigConflictError):
        await h.secrets.put_secret(SECURITY, TENANT, SECRET_REF, "v2", expected_version=0)

    assert await h.store.pending_audit() == []
    outcomes = [r.outcome for r in h.audit.events(AuditEvent.ADMIN_SECRET_WRITE)]
    assert outcomes == ["denied", "ok", "conflict"]


async def test_a_secret_write_refused_before_its_effect_holds_the_failure_not_the_success() -> None:
    sink = SwitchableSink()
    store = SaveHookStore()
    h = Admin(store=store, audit=sink)  # type: ignore[arg-type]

    def audit_dies() -> None:
        sink.up = False
        store.after_save = None  # the withdrawal's own save goes through

    store.after_save = audit_dies
    with pytest.raises(AuditUnavailableError):
        await h.secrets.put_secret(SECURITY, TENANT, SECRET_REF, SECRET_VALUE)

    (held,) = await store.pending_audit()
    assert (held.outcome, held.dimensions["withdrawn_version"]) == ("failed", 2)
    sink.up = True
    await forward_audit_outbox(store, sink)
    assert [r.outcome for r in sink.records] == ["failed"]


class _FailingSettle(InMemoryWorkspaceStore):
    """Loses its connection right after the sink took a record, before deleting it."""

    def __init__(self) -> None:
        super().__init__()
        self.settle_fails = True

    async def settle_audit(self, correlation_id: str) -> None:
        if self.settle_fails:
            raise ConnectionError("state database gone")
        await super().settle_audit(correlation_id)


async def test_a_record_delivered_but_not_settled_is_delivered_again_under_its_own_id() -> None:
    store = _FailingSettle()
    sink = SwitchableSink()
    h = Admin(store=store, audit=sink)  # type: ignore[arg-type]
    await h.secrets.put_secret(SECURITY, TENANT, SECRET_REF, SECRET_VALUE)

    store.settle_fails = False
    await forward_audit_outbox(store, sink)

    first, again = sink.records
    # A duplicate, recognisable: one administrative record, one correlation id.
    assert first == again
    assert first.correlation_id.startswith("admin:")
    assert await store.pending_audit() == []
