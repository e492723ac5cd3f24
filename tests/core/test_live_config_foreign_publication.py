"""A stored publication filed under one tenant but holding another tenant's snapshot.

Publications are kept per tenant in a shared database; a row written by hand (or restored
from the wrong backup) can hold a snapshot whose ``tenant_id`` is not the tenant it is filed
under. Serving it would run tenant B's exposures for tenant A's callers, and the follower
would open — or replace — tenant B's providers from a row that is not B's. The repository
refuses such a row, classified, and the follower leaves both tenants' providers alone.
"""

from __future__ import annotations

from typing import cast

import pytest

from esra.core._admin.store import WorkspaceStore
from esra.core._durable_config import DurableConfigRepository
from esra.core._live_config import ConfigFollower
from esra.core._opened_providers import OpenedProviders
from esra.core._provider_registry import ProviderRegistry
from esra.core.config import ConfigSnapshot
from esra.core.exceptions import ConfigurationError
from tests.core.factories import TENANT
from tests.core.test_live_config import engine, request_for, sources

OTHER = "tenant-b"


class MisfiledStore:
    """Publications by tenant, as a database holds them, rows given verbatim."""

    def __init__(self, rows: dict[str, tuple[int, ConfigSnapshot]]) -> None:
        self._rows = rows

    async def published_versions(self) -> dict[str, int]:
        return {tenant: version for tenant, (version, _snapshot) in self._rows.items()}

    async def published_at(self, tenant_id: str, version: int) -> ConfigSnapshot | None:
        stored = self._rows.get(tenant_id)
        return stored[1] if stored is not None and stored[0] == version else None


def _store() -> WorkspaceStore:
    # Filed under TENANT, but the snapshot is OTHER's.
    misfiled = sources(("s-1", "db-1"), tenant_id=OTHER)
    return cast(WorkspaceStore, MisfiledStore({TENANT: (3, misfiled)}))


async def test_a_snapshot_filed_under_another_tenant_is_not_served() -> None:
    repository = DurableConfigRepository(_store())
    with pytest.raises(ConfigurationError):
        await repository.snapshot(TENANT)


async def test_the_follower_opens_nothing_for_either_tenant_from_a_misfiled_row() -> None:
    test_engine = engine()
    repository = DurableConfigRepository(_store())
    providers = OpenedProviders(ProviderRegistry({"in_memory": test_engine.open}))
    follower = ConfigFollower(repository, providers, request_for=request_for, poll_s=0.01)
    assert await follower.sync() == frozenset()
    assert test_engine.opened == []
    assert dict(follower.providers_for(OTHER)) == {}
    assert dict(follower.providers_for(TENANT)) == {}
