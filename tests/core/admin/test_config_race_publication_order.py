"""Two publications of one tenant racing in one host: the runtime ends on the latest one.

A publication is saved, then handed to the runtime (``ConfigPublisher``). Between the two a
publish awaits (the save's commit reaching the host, the audit outbox being forwarded), so a
later publication may be saved and handed first. The earlier one, handed after it, must not
put an older snapshot back in front of callers while the store says a newer one is current.
"""

from __future__ import annotations

import asyncio

from esra.core._static_config import StaticConfigRepository
from esra.core.admin import (
    AdminWorkspace,
    ConfigChange,
    ExposureService,
    InMemoryWorkspaceStore,
    Role,
)
from esra.core.audit import AuditRecord
from esra.core.config import ConfigSnapshot
from tests.core.admin.test_chain import Admin, holder, run_until
from tests.core.factories import SLUG, TENANT


class HeldAfterPublishing(InMemoryWorkspaceStore):
    """Holds the first publication's save after it is stored, until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.holding = False

    async def save(
        self,
        workspace: AdminWorkspace,
        *,
        expected_version: int,
        change: ConfigChange,
        audit: AuditRecord | None = None,
    ) -> None:
        await super().save(workspace, expected_version=expected_version, change=change, audit=audit)
        if self.holding and workspace.published_version == workspace.version:
            self.holding = False
            self.held.set()
            await self.release.wait()


class Runtime(StaticConfigRepository):
    """The host's runtime, recording each snapshot it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[str] = []

    def publish(self, snapshot: ConfigSnapshot) -> None:
        self.handed.append(snapshot.version)
        super().publish(snapshot)


async def test_an_earlier_publication_handed_late_does_not_replace_a_later_one() -> None:
    store = HeldAfterPublishing()
    h = Admin(store=store)
    await run_until(h, 4)
    runtime = Runtime()
    service = ExposureService(store, runtime, audit=h.audit, clock=h.clock)
    publisher = holder(Role.ESRA_EXPOSURE_MANAGE)

    store.holding = True
    first = asyncio.create_task(service.publish(publisher, TENANT, SLUG, reason="first"))
    await store.held.wait()
    second = await service.publish(publisher, TENANT, SLUG, reason="second")
    store.release.set()
    earlier = await first

    assert earlier.version < second.version
    latest = (await store.published_versions())[TENANT]
    assert latest == second.version
    served = await runtime.snapshot(TENANT)
    assert served is not None
    assert served.version == str(latest), runtime.handed
    assert served == await store.published_at(TENANT, latest)
