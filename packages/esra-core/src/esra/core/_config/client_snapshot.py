"""The runtime snapshot: one tenant's configuration as one client application may reach it.

Spec 003 keys the runtime snapshot to the tenant *and* the client application. A tenant's
``ConfigSnapshot`` holds everything every client application of the tenant may use;
``client_snapshot`` derives from it, at the same version, what one client application may
use, so the pipeline of a call from that application never holds an object reserved to
another:

* exposures: the published ones whose audience and access policy admit the client
  application (``Exposure.published_to``, ``AccessPolicy.admits_client_app``), with their
  access policies;
* capabilities: those the kept exposures name, each binding only sources that pass the
  source policy (``Source.admits``: ``ACTIVE`` and the client application admitted);
* sources: every source that passes the source policy, and their mappings;
* an exposure's ``source_subset``: intersected with those sources, because a snapshot refuses
  a subset naming a source it does not hold. An empty intersection stays an empty set (it
  still admits nothing), never ``None`` (which would admit every binding).

Exactly what is safe to narrow, so that ``esra.core._pipeline.scope`` — which keeps every one
of its checks, for defence in depth — decides and audits every call as it would on the
tenant's snapshot:

* Every source passing the source policy is kept, bound or not: scope's audit funnel counts
  level 1 (``admitted_source_policy``) over all of them, not only over the bound ones.
* Every binding dropped is one scope's level 1 drops anyway, so the later levels' counts
  are the same numbers.
* Every exposure dropped is one ``admitted_exposure`` refuses for this client application
  whatever the caller's claims; the refusal's record carries no dimensions, so an exposure
  that is absent is refused and recorded exactly as one that is not admitted. Claims are
  the caller's, not the application's: ``required_claims`` stay for scope to check.
* A kept exposure whose capability loses every binding is kept, with a capability binding
  nothing: scope then fails with ``ESRA_NO_SOURCES_AVAILABLE`` after its ``failed`` funnel
  record, as it does on the tenant's snapshot, and tools/list still lists the tool. Dropping
  it would turn that error into ``ESRA_EXPOSURE_NOT_FOUND`` and change the record.

``ClientSnapshotCache`` keeps the derived snapshots of the most recent (tenant, client
application, version) triples, so a derivation runs once per configuration version and
client application.
"""

from __future__ import annotations

from collections import OrderedDict

import attrs

from esra.core._config.exposure import Exposure
from esra.core._config.snapshot import ConfigSnapshot

__all__ = ["DEFAULT_MAX_CLIENT_SNAPSHOTS", "ClientSnapshotCache", "client_snapshot"]

DEFAULT_MAX_CLIENT_SNAPSHOTS = 256


def client_snapshot(snapshot: ConfigSnapshot, client_app_id: str) -> ConfigSnapshot:
    """The runtime snapshot of ``client_app_id`` in ``snapshot``'s tenant, at its version."""
    sources = tuple(s for s in snapshot.sources if s.admits(client_app_id))
    source_ids = frozenset(s.id for s in sources)
    exposures = tuple(
        _within(exposure, source_ids)
        for exposure in snapshot.exposures
        if _admits(snapshot, exposure, client_app_id)
    )
    slugs = {e.slug for e in exposures}
    named = {e.capability_id for e in exposures}
    capabilities = tuple(
        attrs.evolve(c, bindings=tuple(b for b in c.bindings if b.source_id in source_ids))
        for c in snapshot.capabilities
        if c.id in named
    )
    return ConfigSnapshot(
        tenant_id=snapshot.tenant_id,
        version=snapshot.version,
        sources=sources,
        mappings=tuple(m for m in snapshot.mappings if m.source_id in source_ids),
        capabilities=capabilities,
        exposures=exposures,
        access_policies=tuple(p for p in snapshot.access_policies if p.slug in slugs),
    )


def _admits(snapshot: ConfigSnapshot, exposure: Exposure, client_app_id: str) -> bool:
    policy = snapshot.access_policy(exposure.slug)
    return (
        exposure.published_to(client_app_id)
        and policy is not None
        and policy.admits_client_app(client_app_id)
    )


def _within(exposure: Exposure, source_ids: frozenset[str]) -> Exposure:
    if exposure.source_subset is None:
        return exposure
    return attrs.evolve(exposure, source_subset=exposure.source_subset & source_ids)


class ClientSnapshotCache:
    """The runtime snapshots last derived, at most ``max_entries``, least recently used out.

    Keyed by (tenant, client application, version). An entry also remembers the tenant
    snapshot it was derived from and serves only that very object: a repository that
    replaces a tenant's snapshot by a different one under the same version string (a
    settings file reloaded, a test) gets a fresh derivation, never a stale one.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_CLIENT_SNAPSHOTS) -> None:
        if max_entries < 1:
            msg = "max_entries must be positive"
            raise ValueError(msg)
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str, str], tuple[ConfigSnapshot, ConfigSnapshot]]
        self._entries = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def of(self, snapshot: ConfigSnapshot, client_app_id: str) -> ConfigSnapshot:
        """The runtime snapshot of ``client_app_id`` in ``snapshot``, derived at most once."""
        key = (snapshot.tenant_id, client_app_id, snapshot.version)
        entry = self._entries.get(key)
        if entry is not None and entry[0] is snapshot:
            self._entries.move_to_end(key)
            return entry[1]
        derived = client_snapshot(snapshot, client_app_id)
        self._entries[key] = (snapshot, derived)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return derived
