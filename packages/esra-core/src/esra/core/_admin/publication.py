"""Publication: re-validate a tenant's draft and hand the snapshot to the runtime.

Publication re-asserts what the domain already rejects (names unique within the tenant, no
cross-tenant reference) and adds what only the chain knows: the exposure's access policy
exists and agrees with it, every connection secret a source names exists, and no connection
template holds a literal password. Every record-filter template is parsed against its
mapping once more. Every physical name of every mapping is asked of its source kind's
identifier check, when the kind's provider factory states one (Oracle's refuses a ``"`` or a
NUL, which no Oracle identifier can hold): a name the engine cannot hold is refused here, not
by every search of the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import Mapping as AbstractMapping
from typing import Protocol

import attrs

from esra.core._admin.workspace import AdminWorkspace
from esra.core._config.connection_credentials import check_no_literal_password
from esra.core._config.record_filter_template import parse_record_filter_template
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import LifecycleState, Source
from esra.core._identifier_checks import IdentifierCheck, refuse_unholdable_identifiers
from esra.core._provider_registry import installed_identifier_checks
from esra.core._secrets.references import reference_scheme
from esra.core.exceptions import ConfigurationError
from esra.core.ports import SecretStore

__all__ = ["ConfigPublisher", "names_missing_secret", "publishable_snapshot"]

_SECRET_PLACEHOLDER = re.compile(r"\$\{secret:([^}]*)\}")


def names_missing_secret(connection_ref: str, written: Iterable[str]) -> bool:
    """Whether ``connection_ref`` names a stored secret that was never written.

    A connection template (``postgresql://u:${secret:pg}@db/x``) names its stored secrets in
    placeholders (``env:``/``file:`` ones live outside ESRA and need no write); any other
    reference, or a template adopted from the running configuration, is itself the
    reference.
    """
    known = set(written)
    if connection_ref in known:
        return False
    named = _SECRET_PLACEHOLDER.findall(connection_ref)
    if not named:
        return True
    return any(reference_scheme(name) is None and name not in known for name in named)


async def unwritten_secrets(
    secrets: SecretStore, tenant_id: str, sources: Iterable[Source]
) -> frozenset[str]:
    """The stored secrets ``sources`` name (``${secret:NAME}``) that ``secrets`` cannot resolve.

    A secret write is recorded in the workspace (``secret_rotations``) before the store is
    written, and withdrawn if that write fails; a host killed between the two leaves a write
    on record for a secret that was never stored, which ``names_missing_secret`` alone would
    take as written. A store that cannot answer counts as not holding the secret: the
    change naming it is refused, never saved on trust.
    """
    named = {
        name
        for source in sources
        for name in _SECRET_PLACEHOLDER.findall(source.connection_ref)
        if reference_scheme(name) is None
    }
    missing = set()
    for name in sorted(named):
        try:
            await secrets.resolve(tenant_id, name)
        except Exception:  # unresolvable, whatever the reason, is not stored
            missing.add(name)
    return frozenset(missing)


class ConfigPublisher(Protocol):
    """**Protocol:** receives published snapshots (``StaticConfigRepository`` is one)."""

    def publish(self, snapshot: ConfigSnapshot) -> None:
        """Make ``snapshot`` its tenant's current runtime configuration."""
        ...


def publishable_snapshot(
    workspace: AdminWorkspace,
    slug: str,
    *,
    identifier_checks: AbstractMapping[str, IdentifierCheck] | None = None,
) -> ConfigSnapshot:
    """Return the draft with exposure ``slug`` marked published, after re-validating.

    Args:
        workspace: the tenant's draft.
        slug: the exposure to publish.
        identifier_checks: per provider kind, which identifiers its engine cannot hold
            (default: what the installed provider factories state,
            ``installed_identifier_checks``).

    Raises:
        ConfigurationError: the draft may not be published
            (``UnholdableIdentifierError``: a mapping names an identifier its source's
            engine cannot hold).
    """
    snapshot = workspace.snapshot
    tenant = workspace.tenant_id
    if snapshot.tenant_id != tenant:
        raise ConfigurationError("the draft belongs to another tenant")
    exposure = snapshot.exposure_by_slug(slug)
    if exposure is None:
        raise ConfigurationError(f"no exposure {slug!r} to publish")
    for policy in snapshot.access_policies:
        if policy.tenant_id != tenant:
            raise ConfigurationError(f"policy {policy.slug!r} belongs to another tenant")
    for candidate in snapshot.exposures:
        if candidate.published or candidate.slug == slug:
            _check_policy(snapshot, candidate.slug, candidate.capability_id, candidate.audience)
    for source in snapshot.sources:
        # Modelling refuses a literal password already; a workspace stored before it did
        # must not publish one either.
        check_no_literal_password(source)
        if names_missing_secret(source.connection_ref, workspace.secret_rotations):
            raise ConfigurationError(f"source {source.id!r} names a missing connection secret")
    checks = installed_identifier_checks() if identifier_checks is None else identifier_checks
    for source in snapshot.sources:
        check = checks.get(source.provider_kind)
        # A retired source is never opened; one brought back is checked when published again.
        if check is not None and source.lifecycle is not LifecycleState.RETIRED:
            refuse_unholdable_identifiers(source, snapshot.mappings_of(source.id), check)
    for mapping in snapshot.mappings:
        # Parsed again, by design, like the policy checks: whatever path built the draft, a
        # template that is not valid against its mapping's fields is never published.
        if mapping.record_filter_template is not None:
            parse_record_filter_template(mapping.record_filter_template, mapping)
    exposures = tuple(
        attrs.evolve(e, published=True) if e.slug == slug else e for e in snapshot.exposures
    )
    # Constructing the snapshot again re-runs uniqueness and cross-tenant checks.
    return attrs.evolve(snapshot, exposures=exposures)


def _check_policy(
    snapshot: ConfigSnapshot, slug: str, capability_id: str, audience: frozenset[str]
) -> None:
    # The snapshot's own construction checks this too; publication asserts it again, by
    # design, so a future path that builds snapshots differently still cannot publish.
    policy = snapshot.access_policy(slug)
    if policy is None:
        raise ConfigurationError(f"exposure {slug!r} has no access policy")
    if policy.capability_id != capability_id:
        raise ConfigurationError(f"exposure {slug!r} and its policy name different capabilities")
    allowed = policy.allowed_client_apps
    if allowed is not None and not audience <= allowed:
        raise ConfigurationError(f"exposure {slug!r} reaches beyond its policy's client apps")
