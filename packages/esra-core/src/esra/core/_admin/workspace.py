"""AdminWorkspace: one tenant's draft configuration, versioned, with what publication needs.

The workspace holds the draft ``ConfigSnapshot`` (access policies included, so the runtime
evaluates exactly what was published) plus the secret references that exist (never their
values) and the last published version. Every change
produces a new workspace one version later; the snapshot carries the same version. Where
workspaces are kept is a ``WorkspaceStore`` (``esra.core._admin.store``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from esra.core._config.snapshot import ConfigSnapshot

__all__ = ["AdminWorkspace", "adopted_workspace"]


def _empty_snapshot(instance: AdminWorkspace) -> ConfigSnapshot:
    return ConfigSnapshot(tenant_id=instance.tenant_id, version=str(instance.version))


@attrs.frozen
class AdminWorkspace:
    """A tenant's configuration draft at ``version``.

    ``secret_rotations`` maps each connection-secret reference to how many times it has been
    written (1 when created). ``published_version`` is the version last published, if any.
    """

    tenant_id: str
    version: int = 0
    snapshot: ConfigSnapshot = attrs.field(default=attrs.Factory(_empty_snapshot, takes_self=True))
    secret_rotations: Mapping[str, int] = attrs.field(factory=dict)
    published_version: int | None = None

    def next(
        self,
        *,
        snapshot: ConfigSnapshot | None = None,
        secret_rotations: Mapping[str, int] | None = None,
        published: bool = False,
    ) -> AdminWorkspace:
        """Return the workspace one version later with the given parts replaced.

        Raises:
            ConfigurationError: the resulting snapshot is inconsistent.
        """
        version = self.version + 1
        base = snapshot if snapshot is not None else self.snapshot
        return AdminWorkspace(
            tenant_id=self.tenant_id,
            version=version,
            # Re-constructing the snapshot re-runs every cross-reference check.
            snapshot=attrs.evolve(base, version=str(version)),
            secret_rotations=dict(
                secret_rotations if secret_rotations is not None else self.secret_rotations
            ),
            published_version=version if published else self.published_version,
        )


def adopted_workspace(snapshot: ConfigSnapshot) -> AdminWorkspace:
    """The version-1 workspace of a tenant that already runs on ``snapshot``.

    A host that served ``snapshot`` before any administrator touched it adopts it, so the
    first change edits the running configuration instead of replacing it with an empty one.
    Every connection secret its sources name counts as written once; it is published at
    version 1 if any of its exposures is.
    """
    published = any(exposure.published for exposure in snapshot.exposures)
    return AdminWorkspace(
        tenant_id=snapshot.tenant_id,
        version=1,
        snapshot=snapshot,
        secret_rotations={source.connection_ref: 1 for source in snapshot.sources},
        published_version=1 if published else None,
    )
