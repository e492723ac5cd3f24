"""Only a Ready store is a source: the pipeline's configuration with an unready store withheld.

Spec 004: initialising the store "registers the store as a synthetic source so it is
searchable", and spec 003: source resolution filters by lifecycle state before any metadata
reaches a model. A store source in a tenant's configuration whose store is not Ready
(Disabled, Enabled, Initializing or Failed) is therefore served to the pipeline as a draft
source: scope level 1 drops it, so it is never probed, offered to a model, searched, fetched
or reported unavailable. A tenant that has not initialised its store gets complete answers
from its other sources, not answers degraded by a store nobody has turned on; once the store
is Ready, the very next invocation searches it.

What the operator configured is unchanged: the admin API and the portal read the repository
itself, and the snapshot's version stays the published one (it is what the audit names). A
derived snapshot is kept per tenant and reused while the repository serves the same snapshot
object, so an unready store costs an invocation one status check, not a copy of the
configuration.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import LifecycleState, Source
from esra.core._docstore.lifecycle import StoreLifecycle, StoreStatus
from esra.core.ports import ConfigRepository

__all__ = ["ReadyStoresConfig", "TenantStoreSource"]


@attrs.frozen
class TenantStoreSource:
    """A tenant's store as its configuration names it: the store source's id, and the
    lifecycle that says whether the store is Ready."""

    source_id: str
    lifecycle: StoreLifecycle


class ReadyStoresConfig:
    """A ``ConfigRepository`` over ``config`` in which each tenant's store source is active
    only while its store is Ready.

    Args:
        config: the tenants' configuration as published.
        stores: per tenant, its store; a tenant absent here is served ``config``'s snapshot
            unchanged.
    """

    def __init__(self, config: ConfigRepository, stores: Mapping[str, TenantStoreSource]) -> None:
        self._config = config
        self._stores = stores
        # Per tenant: the last snapshot read from ``config`` with the store unready, and what
        # was derived from it.
        self._withheld: dict[str, tuple[ConfigSnapshot, ConfigSnapshot]] = {}

    async def snapshot(self, tenant_id: str) -> ConfigSnapshot | None:
        """The tenant's snapshot, its store source a draft unless the store is Ready."""
        snapshot = await self._config.snapshot(tenant_id)
        store = self._stores.get(tenant_id)
        if snapshot is None or store is None:
            return snapshot
        if store.lifecycle.current.status is StoreStatus.READY:
            return snapshot
        last = self._withheld.get(tenant_id)
        if last is not None and last[0] is snapshot:
            return last[1]
        withheld = attrs.evolve(
            snapshot,
            sources=tuple(_withheld(s) if s.id == store.source_id else s for s in snapshot.sources),
        )
        self._withheld[tenant_id] = (snapshot, withheld)
        return withheld


def _withheld(source: Source) -> Source:
    # Only an active source changes: a store source the operator retired stays retired.
    if source.lifecycle is not LifecycleState.ACTIVE:
        return source
    return attrs.evolve(source, lifecycle=LifecycleState.DRAFT)
