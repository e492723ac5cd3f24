"""The lookups an ESRA screen needs: which model profiles, client applications and trusted
issuers a tenant's configuration may name.

``003_…``: both ESRA manage roles imply read, "and each carries the lookups an ESRA screen
needs to name a model profile, a client application or a trusted issuer". So the lookups
take ``ESRA_DATA_READ`` (which ``ESRA_DATA_MANAGE`` and ``ESRA_EXPOSURE_MANAGE`` imply) on the
tenant, are read-only, and are audited like the workspace view (event
``esra.admin.lookups.view``, denials too).

What each lists, for the caller's tenant only:

- **model profiles**: the profiles a capability's ``model_profile`` may name — the host's
  models, by kind and model name, never a key or an endpoint;
- **client applications**: every client application the tenant's configuration already
  names (an exposure's audience, an access policy's or a source's allowed applications);
  ESRA keeps no other registry of them — the identity provider does;
- **trusted issuers**: the issuers whose tokens the host accepts *for this tenant*, with
  their audiences — never their keys; an issuer trusted only for other tenants is absent.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from esra.core._admin.recording import record_admin_action
from esra.core._admin.roles import Administrator, NotPermittedError, Role
from esra.core._admin.store import WorkspaceStore
from esra.core._admin.workspace import AdminWorkspace
from esra.core._audit.record import AuditDimension
from esra.core._config.snapshot import ConfigSnapshot
from esra.core.codes import AuditEvent
from esra.core.exceptions import ConfigurationError
from esra.core.ports import AuditSink, Clock

__all__ = [
    "HostLookups",
    "IssuerLookup",
    "LookupService",
    "Lookups",
    "ModelProfile",
    "client_applications",
]


@attrs.frozen
class ModelProfile:
    """A model a capability may name by ``name`` (``Capability.model_profile``)."""

    name: str
    kind: str
    model: str | None = None


def _names(setting: str, values: Iterable[str]) -> tuple[str, ...]:
    """``values`` as names, each non-blank text. One string is refused rather than iterated:
    ``tenants="acme-eu"`` would otherwise be read by ``in`` as a substring test, listing an
    issuer trusted only for ``acme-eu`` to tenant ``acme`` (and ``eu``, and ``-``)."""
    if isinstance(values, str) or not isinstance(values, Iterable):
        msg = f"an issuer's {setting} must be a collection of names, not one value"
        raise ConfigurationError(msg)
    names = tuple(values)
    if not all(isinstance(name, str) and name.strip() for name in names):
        msg = f"an issuer's {setting} must each be a non-blank name"
        raise ConfigurationError(msg)
    return names


def _audiences(values: Iterable[str]) -> tuple[str, ...]:
    return _names("audiences", values)


def _tenants(values: Iterable[str] | None) -> frozenset[str] | None:
    return None if values is None else frozenset(_names("tenants", values))


@attrs.frozen
class IssuerLookup:
    """A trusted issuer as a screen names it: no keys. ``tenants`` ``None``: every tenant.

    Raises:
        ConfigurationError: ``audiences`` or ``tenants`` is one string rather than a
            collection, or names a blank or non-text entry.
    """

    issuer: str
    audiences: tuple[str, ...] = attrs.field(converter=_audiences)
    tenants: frozenset[str] | None = attrs.field(default=None, converter=_tenants)

    def trusted_for(self, tenant_id: str) -> bool:
        """Whether tokens of this issuer are accepted for ``tenant_id``."""
        return self.tenants is None or tenant_id in self.tenants


@attrs.frozen
class HostLookups:
    """What the host itself contributes to every tenant's lookups."""

    model_profiles: tuple[ModelProfile, ...] = ()
    trusted_issuers: tuple[IssuerLookup, ...] = ()


@attrs.frozen
class Lookups:
    """One tenant's lookups."""

    model_profiles: tuple[ModelProfile, ...]
    client_applications: tuple[str, ...]
    trusted_issuers: tuple[IssuerLookup, ...]


def client_applications(snapshot: ConfigSnapshot) -> tuple[str, ...]:
    """Every client application ``snapshot`` names, sorted."""
    named: set[str] = set()
    for exposure in snapshot.exposures:
        named.update(exposure.audience)
    allowed: Iterable[frozenset[str] | None] = (
        *(policy.allowed_client_apps for policy in snapshot.access_policies),
        *(source.policy.allowed_client_apps for source in snapshot.sources),
    )
    for apps in allowed:
        named.update(apps or ())
    return tuple(sorted(named))


class LookupService:
    """The tenant's lookups over its draft in ``workspaces`` and what the ``host`` knows."""

    def __init__(
        self, workspaces: WorkspaceStore, *, host: HostLookups, audit: AuditSink, clock: Clock
    ) -> None:
        self._workspaces = workspaces
        self._host = host
        self._audit = audit
        self._clock = clock

    async def lookups(self, admin: Administrator, tenant_id: str) -> Lookups:
        """The tenant's lookups; needs ``ESRA_DATA_READ`` (audited, denials too).

        Raises:
            NotPermittedError: ``admin`` does not hold it on ``tenant_id``.
        """
        dims: dict[str, AuditDimension] = {
            "subject": admin.subject,
            "role": Role.ESRA_DATA_READ.value,
        }
        if not admin.may(Role.ESRA_DATA_READ, tenant_id):
            await record_admin_action(
                self._audit,
                self._clock,
                AuditEvent.ADMIN_LOOKUPS_VIEW,
                by=admin,
                tenant_id=tenant_id,
                outcome="denied",
                reason="role",
                dimensions=dims,
            )
            raise NotPermittedError
        workspace = await self._workspaces.load(tenant_id) or AdminWorkspace(tenant_id=tenant_id)
        await record_admin_action(
            self._audit,
            self._clock,
            AuditEvent.ADMIN_LOOKUPS_VIEW,
            by=admin,
            tenant_id=tenant_id,
            outcome="ok",
            reason=None,
            dimensions=dims,
        )
        return Lookups(
            model_profiles=self._host.model_profiles,
            client_applications=client_applications(workspace.snapshot),
            trusted_issuers=tuple(
                i for i in self._host.trusted_issuers if i.trusted_for(tenant_id)
            ),
        )
