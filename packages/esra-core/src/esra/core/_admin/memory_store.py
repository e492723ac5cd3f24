"""InMemoryWorkspaceStore: the ``WorkspaceStore`` port in a process's memory.

For tests and embedders that keep configuration in code. It follows every rule of the port
(the same contract suite runs against it and the durable stores): a save naming a stale
version is refused, history is append-only, a publication is never replaced, a change's audit
record is held in the outbox with the change until it is settled, and one claim of the outbox
at a time. Each method runs without yielding to the event loop, so a check and its write are
one atomic step.
"""

from __future__ import annotations

from esra.core._admin.memory_outbox import InMemoryAuditOutbox
from esra.core._admin.store import ConfigChange, ConfigConflictError, check_save
from esra.core._admin.workspace import AdminWorkspace
from esra.core._audit.record import AuditRecord
from esra.core._config.snapshot import ConfigSnapshot

__all__ = ["InMemoryWorkspaceStore"]


class InMemoryWorkspaceStore(InMemoryAuditOutbox):
    """Each tenant's workspaces, changes and publications, in dicts; lost with the process."""

    def __init__(self) -> None:
        super().__init__()
        self._versions: dict[str, list[AdminWorkspace]] = {}
        self._changes: dict[str, list[ConfigChange]] = {}
        self._published: dict[str, dict[int, ConfigSnapshot]] = {}

    async def load(self, tenant_id: str) -> AdminWorkspace | None:
        """The tenant's current workspace, or ``None`` before its first save."""
        versions = self._versions.get(tenant_id)
        return versions[-1] if versions else None

    async def save(
        self,
        workspace: AdminWorkspace,
        *,
        expected_version: int,
        change: ConfigChange,
        audit: AuditRecord | None = None,
    ) -> None:
        """Store ``workspace`` if the tenant is still at ``expected_version``."""
        check_save(workspace, expected_version, change)
        versions = self._versions.setdefault(workspace.tenant_id, [])
        current = versions[-1].version if versions else 0
        if current != expected_version:
            raise ConfigConflictError(
                workspace.tenant_id, expected=expected_version, current=current
            )
        if audit is not None:
            self.hold(audit)
        versions.append(workspace)
        self._changes.setdefault(workspace.tenant_id, []).append(change)
        if workspace.published_version == workspace.version:
            self._published.setdefault(workspace.tenant_id, {})[workspace.version] = (
                workspace.snapshot
            )

    async def history(self, tenant_id: str) -> list[ConfigChange]:
        """Every change saved for the tenant, oldest first."""
        return list(self._changes.get(tenant_id, ()))

    async def workspace_at(self, tenant_id: str, version: int) -> AdminWorkspace | None:
        """The workspace as it was saved at ``version``, if that version exists."""
        return next((w for w in self._versions.get(tenant_id, ()) if w.version == version), None)

    async def published(self, tenant_id: str) -> ConfigSnapshot | None:
        """The tenant's latest publication, or ``None`` if it never published."""
        published = self._published.get(tenant_id)
        return published[max(published)] if published else None

    async def published_at(self, tenant_id: str, version: int) -> ConfigSnapshot | None:
        """The snapshot published at workspace ``version``."""
        return self._published.get(tenant_id, {}).get(version)

    async def published_versions(self) -> dict[str, int]:
        """Each tenant's latest published version."""
        return {tenant: max(published) for tenant, published in self._published.items()}
