"""WorkspaceStore: where each tenant's admin workspace, its history and its publications live.

The triple-control chain reads a tenant's workspace at version *v* and saves the next one
naming *v* as the version it edits (optimistic concurrency): a save whose expected version is
no longer the stored one raises ``ConfigConflictError`` and changes nothing, so two
administrators editing one draft at once never silently overwrite each other. Every save
records a ``ConfigChange`` (who, when, why and what) in an append-only history, and a save
whose workspace is published at its own version also stores that snapshot under the version,
in the same transaction; a stored publication is never replaced. A save may carry the
change's audit record, which the store holds in its audit outbox in that same transaction
(``esra.core._admin.audit_outbox``) until the audit sink has it.

Adapters keep the documents this module encodes (``workspace_document``), which are the
configuration converter's own output, so a stored draft reads back exactly as written and a
row is as reviewable as an exported file. Secret values never reach a workspace: it holds
references and their rotation counts only.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

import attrs

from esra.core._admin.audit_outbox import AuditOutbox
from esra.core._admin.workspace import AdminWorkspace, adopted_workspace
from esra.core._audit.record import AuditRecord
from esra.core._config.converter import dump_snapshot, load_snapshot
from esra.core._config.snapshot import ConfigSnapshot
from esra.core.codes import ErrorCode
from esra.core.exceptions import ConfigurationError, EsraError

__all__ = [
    "ADOPT_ACTION",
    "WORKSPACE_DOCUMENT_FORMAT",
    "ConfigChange",
    "ConfigConflictError",
    "WorkspaceStore",
    "adopt",
    "check_save",
    "workspace_document",
    "workspace_from_document",
]

# Bumped only if the stored document's shape changes; a reader refuses formats it does not know.
WORKSPACE_DOCUMENT_FORMAT = 1


@attrs.frozen
class ConfigChange:
    """One saved change of a tenant's configuration: who, when, why and what.

    ``version`` is the workspace version the change produced; ``action`` the audit event
    of the service that made it (``esra.admin.source.model``, …) and ``target`` the id it
    names (a source id, a slug, a secret reference); ``reason`` the author's own words, if
    given.
    """

    tenant_id: str
    version: int
    subject: str
    at: datetime
    action: str
    target: str
    reason: str | None = None


class ConfigConflictError(EsraError):
    """A configuration write named a version that is no longer the current one.

    Nothing was written; reload the workspace (now at ``current``) and retry the change.
    """

    code = ErrorCode.ESRA_CONFIG_CONFLICT
    public_message = "The configuration changed since it was read; reload it and retry."

    def __init__(self, tenant_id: str, *, expected: int, current: int | None) -> None:
        self.tenant_id = tenant_id
        self.expected = expected
        self.current = current
        now = "none" if current is None else str(current)
        super().__init__(
            f"the configuration of tenant {tenant_id!r} is at version {now}, "
            f"not {expected}: reload it and retry"
        )


class WorkspaceStore(AuditOutbox, Protocol):
    """**Protocol:** tenant workspaces, versioned with optimistic concurrency.

    A tenant nobody has saved yet has no workspace (``load`` answers ``None``) and is at
    version 0. Every method is scoped to the tenant it names; nothing is shared across
    tenants.
    """

    async def load(self, tenant_id: str) -> AdminWorkspace | None:
        """The tenant's current workspace, or ``None`` before its first save."""
        ...

    async def save(
        self,
        workspace: AdminWorkspace,
        *,
        expected_version: int,
        change: ConfigChange,
        audit: AuditRecord | None = None,
    ) -> None:
        """Store ``workspace`` if the tenant is still at ``expected_version``.

        ``workspace.version`` must be ``expected_version + 1`` and ``change`` must describe
        it (``check_save``). When ``workspace.published_version == workspace.version`` its
        snapshot is also stored as the publication of that version, and ``audit`` (the
        change's audit record) is held in the audit outbox, in the same atomic write.

        Raises:
            ConfigConflictError: the tenant is no longer at ``expected_version``; nothing
                was written.
            ValueError: ``workspace`` and ``change`` do not describe one next version.
        """
        ...

    async def history(self, tenant_id: str) -> list[ConfigChange]:
        """Every change saved for the tenant, oldest first."""
        ...

    async def workspace_at(self, tenant_id: str, version: int) -> AdminWorkspace | None:
        """The workspace as it was saved at ``version``, if that version exists."""
        ...

    async def published(self, tenant_id: str) -> ConfigSnapshot | None:
        """The tenant's latest publication, or ``None`` if it never published."""
        ...

    async def published_at(self, tenant_id: str, version: int) -> ConfigSnapshot | None:
        """The snapshot published at workspace ``version``, exactly as it was published."""
        ...

    async def published_versions(self) -> dict[str, int]:
        """Each tenant's latest published version: one cheap query, for polling hosts."""
        ...


def check_save(workspace: AdminWorkspace, expected_version: int, change: ConfigChange) -> None:
    """Refuse a save whose parts disagree (a programming error, never a user's).

    Raises:
        ValueError: the workspace is not one version past ``expected_version``, or
            ``change`` names another tenant or version.
    """
    if expected_version < 0 or workspace.version != expected_version + 1:
        msg = f"a save of version {workspace.version} cannot edit version {expected_version}"
        raise ValueError(msg)
    if (change.tenant_id, change.version) != (workspace.tenant_id, workspace.version):
        msg = "the change must describe the saved workspace's tenant and version"
        raise ValueError(msg)


def workspace_document(workspace: AdminWorkspace) -> dict[str, Any]:
    """The JSON-compatible document a store keeps for ``workspace``."""
    return {
        "format": WORKSPACE_DOCUMENT_FORMAT,
        "tenant_id": workspace.tenant_id,
        "version": workspace.version,
        "published_version": workspace.published_version,
        "secret_rotations": dict(sorted(workspace.secret_rotations.items())),
        "snapshot": dump_snapshot(workspace.snapshot),
    }


def workspace_from_document(document: object) -> AdminWorkspace:
    """Read back what ``workspace_document`` wrote; the snapshot is checked on the way in.

    Raises:
        ConfigurationError: the document is not a workspace this version of ESRA wrote —
            whatever else it is: whoever can write the state database can put anything in
            a row, and an unclassified error would fail every request of the tenant as
            ``ESRA_INTERNAL``.
    """
    if not isinstance(document, Mapping) or document.get("format") != WORKSPACE_DOCUMENT_FORMAT:
        raise ConfigurationError("the stored workspace has an unknown format")
    rotations = document.get("secret_rotations")
    if not isinstance(rotations, Mapping):
        raise ConfigurationError("the stored workspace has no secret references")
    published = document.get("published_version")
    try:
        return AdminWorkspace(
            tenant_id=str(document["tenant_id"]),
            version=int(document["version"]),
            snapshot=load_snapshot(dict(document["snapshot"])),
            secret_rotations={str(k): int(v) for k, v in rotations.items()},
            published_version=int(published) if published is not None else None,
        )
    except (KeyError, TypeError, ValueError):  # a key missing, or of the wrong type
        raise ConfigurationError("the stored workspace is malformed") from None


ADOPT_ACTION = "esra.admin.workspace.adopt"


async def adopt(
    store: WorkspaceStore, snapshot: ConfigSnapshot, *, subject: str, at: datetime
) -> AdminWorkspace:
    """Start the tenant's workspace from the ``snapshot`` it runs on, unless it has one.

    Saved as version 1 (``adopted_workspace``), recorded as a change by ``subject``. When
    another host adopted or changed it first, that workspace is kept and returned.
    """
    existing = await store.load(snapshot.tenant_id)
    if existing is not None:
        return existing
    workspace = adopted_workspace(snapshot)
    change = ConfigChange(
        tenant_id=snapshot.tenant_id,
        version=1,
        subject=subject,
        at=at,
        action=ADOPT_ACTION,
        target=snapshot.version,
        reason="the configuration the host was started with",
    )
    try:
        await store.save(workspace, expected_version=0, change=change)
    except ConfigConflictError:
        current = await store.load(snapshot.tenant_id)
        if current is None:  # pragma: no cover - a conflict means some version exists
            raise
        return current
    return workspace
