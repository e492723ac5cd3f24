"""DurableConfigRepository: the runtime's configuration, read from a ``WorkspaceStore``.

The ``ConfigRepository`` a host serves from when publications are kept in a database: each
tenant's latest published snapshot, cached in the process so an invocation never waits on a
query. It is also the ``ConfigPublisher`` the chain's ``ExposureService`` tells: a
publication made on this host is served at once. Publications made on another host sharing
the database arrive on the next ``refresh()``, which costs one small query
(``current_versions``) when nothing changed — a host polls it on a timer.

A tenant that never published falls back to ``fallback`` (for example the snapshots a
settings file names), so a host starts serving its file configuration and switches to the
database's once an administrator publishes.
"""

from __future__ import annotations

from collections.abc import Mapping

from esra.core._admin.store import WorkspaceStore
from esra.core._config.snapshot import ConfigSnapshot
from esra.core.exceptions import ConfigurationError
from esra.core.ports import ConfigRepository

__all__ = ["DurableConfigRepository"]

# Marks a snapshot this host published itself: its stored version is not known here, so the
# next refresh reloads it once (and finds exactly what was published).
_UNKNOWN = -1


class DurableConfigRepository:
    """Serves each tenant's latest publication from ``store``, cached per tenant by version.

    Args:
        store: where the chain saved the publications.
        fallback: serves tenants that never published (``None``: they have no configuration).
    """

    def __init__(self, store: WorkspaceStore, *, fallback: ConfigRepository | None = None) -> None:
        self._store = store
        self._fallback = fallback
        self._cached: dict[str, tuple[int, ConfigSnapshot | None]] = {}

    async def snapshot(self, tenant_id: str) -> ConfigSnapshot | None:
        """The tenant's latest published snapshot (or the fallback's, if it never published)."""
        cached = self._cached.get(tenant_id)
        if cached is None:
            return await self._load(tenant_id, await self._store.published_versions())
        _version, snapshot = cached
        if snapshot is None and self._fallback is not None:
            return await self._fallback.snapshot(tenant_id)
        return snapshot

    def publish(self, snapshot: ConfigSnapshot) -> None:
        """Serve ``snapshot`` at once: the chain has just stored it as the tenant's latest."""
        self._cached[snapshot.tenant_id] = (_UNKNOWN, snapshot)

    async def current_versions(self) -> dict[str, int]:
        """Each tenant's latest published version, straight from the store."""
        return await self._store.published_versions()

    async def refresh(self) -> frozenset[str]:
        """Reload every cached tenant whose published version changed; return those tenants.

        One query when nothing changed. A tenant not yet cached is loaded on first use. A
        host whose providers follow the configuration uses ``stale``, ``load`` and ``adopt``
        instead, so a new snapshot is served only together with its providers.
        """
        versions = await self._store.published_versions()
        changed = self.stale(versions)
        for tenant in changed:
            version, snapshot = await self.load(tenant, versions)
            self.adopt(tenant, version, snapshot)
        return changed

    def stale(self, versions: Mapping[str, int]) -> frozenset[str]:
        """The cached tenants whose published version is no longer the one in ``versions``."""
        return frozenset(
            tenant
            for tenant, (version, _snapshot) in self._cached.items()
            if versions.get(tenant, 0) != version
        )

    async def load(
        self, tenant_id: str, versions: Mapping[str, int]
    ) -> tuple[int, ConfigSnapshot | None]:
        """The tenant's publication at its version in ``versions``, read but NOT served yet:
        ``adopt`` serves it. ``None`` when the tenant never published.

        Raises:
            ConfigurationError: the stored publication is another tenant's snapshot.
        """
        version = versions.get(tenant_id, 0)
        snapshot = await self._store.published_at(tenant_id, version) if version else None
        if snapshot is not None and snapshot.tenant_id != tenant_id:
            # A row written by hand or restored from the wrong backup: serving it would run
            # another tenant's configuration (and open its providers) for this one.
            msg = "the stored publication belongs to another tenant"
            raise ConfigurationError(msg)
        return version, snapshot

    def adopt(self, tenant_id: str, version: int, snapshot: ConfigSnapshot | None) -> None:
        """Serve ``snapshot`` (published as ``version``; ``None``: never published) from now on."""
        self._cached[tenant_id] = (version, snapshot)

    async def fallback_snapshot(self, tenant_id: str) -> ConfigSnapshot | None:
        """What a tenant that never published is served (the fallback's snapshot)."""
        return await self._fallback.snapshot(tenant_id) if self._fallback is not None else None

    async def _load(self, tenant_id: str, versions: dict[str, int]) -> ConfigSnapshot | None:
        version, snapshot = await self.load(tenant_id, versions)
        self.adopt(tenant_id, version, snapshot)
        if snapshot is None:
            return await self.fallback_snapshot(tenant_id)
        return snapshot
