"""A publication asks the secret store about the sources it publishes, not an earlier draft's.

``ExposureService.publish`` checks that every stored secret the draft's sources name is really
stored (a host killed between recording a secret write and storing it leaves one on record
only). A change saved between the draft the check read and the draft the publication saves
must not slip a source past that check.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from esra.core._static_config import StaticConfigRepository
from esra.core.admin import (
    AdminWorkspace,
    ConfigConflictError,
    ExposureService,
    InMemorySecretVault,
    InMemoryWorkspaceStore,
    Role,
)
from esra.core.codes import AuditEvent
from esra.core.exceptions import ConfigurationError
from tests.core.admin.test_chain import SECRET_VALUE, Admin, holder, run_until
from tests.core.factories import SLUG, TENANT, make_mapping, make_source

TEMPLATE = "postgresql://reader:${secret:pg-pw}@db.internal/sales"


class EditedAfterFirstLoad(InMemoryWorkspaceStore):
    """Runs ``edit`` once, right after the next ``load`` has answered."""

    def __init__(self) -> None:
        super().__init__()
        self.edit: Callable[[], Coroutine[Any, Any, object]] | None = None

    async def load(self, tenant_id: str) -> AdminWorkspace | None:
        loaded = await super().load(tenant_id)
        edit, self.edit = self.edit, None
        if edit is not None:
            await edit()
        return loaded


async def test_a_source_modelled_during_a_publish_is_checked_against_the_secret_store() -> None:
    store = EditedAfterFirstLoad()
    h = Admin(store=store)
    await run_until(h, 4)
    # On record in the workspace, never stored where this host's publish looks.
    await h.secrets.put_secret(holder(Role.SECURITY_MANAGE), TENANT, "pg-pw", SECRET_VALUE)
    lost = InMemorySecretVault()
    runtime = StaticConfigRepository()
    service = ExposureService(store, runtime, audit=h.audit, clock=h.clock, secrets=lost)

    async def remodel() -> object:
        source = make_source("s-1", connection_ref=TEMPLATE)
        return await h.data.model_source(
            holder(Role.ESRA_DATA_MANAGE), TENANT, source, [make_mapping()]
        )

    store.edit = remodel
    publisher = holder(Role.ESRA_EXPOSURE_MANAGE)
    # Raced: refused, whether as the conflict it is or for the secret it names.
    with pytest.raises((ConfigConflictError, ConfigurationError)):
        await service.publish(publisher, TENANT, SLUG)
    # Retried on the draft as it now is: the secret store is asked about the new source.
    with pytest.raises(ConfigurationError, match="not stored"):
        await service.publish(publisher, TENANT, SLUG)
    assert await runtime.snapshot(TENANT) is None
    latest = await store.published(TENANT)
    assert latest is not None
    assert all(source.connection_ref != TEMPLATE for source in latest.sources)
    outcomes = [r.outcome for r in h.audit.events(AuditEvent.ADMIN_EXPOSURE_PUBLISH)]
    assert outcomes[-1] == "rejected"
    assert "ok" not in outcomes[-2:]
