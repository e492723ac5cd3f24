"""StaticConfigRepository: configuration snapshots held in memory, for embedding and demos."""

from __future__ import annotations

from collections.abc import Iterable

from esra.core._config.snapshot import ConfigSnapshot

__all__ = ["StaticConfigRepository"]


class StaticConfigRepository:
    """Serves a fixed snapshot per tenant; replace one with ``publish``.

    Suits embedders whose configuration lives in code or in files loaded with
    ``esra.core.config.load_snapshot``. A tenant without a snapshot has no exposures.
    """

    def __init__(self, snapshots: Iterable[ConfigSnapshot] = ()) -> None:
        self._snapshots: dict[str, ConfigSnapshot] = {}
        for snapshot in snapshots:
            self.publish(snapshot)

    def publish(self, snapshot: ConfigSnapshot) -> None:
        """Make ``snapshot`` the tenant's current configuration."""
        self._snapshots[snapshot.tenant_id] = snapshot

    async def snapshot(self, tenant_id: str) -> ConfigSnapshot | None:
        """Return the tenant's current snapshot, if any."""
        return self._snapshots.get(tenant_id)
