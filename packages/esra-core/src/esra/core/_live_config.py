"""ConfigFollower: publications applied while the host runs, here at once and elsewhere soon.

A host serves each tenant from a ``DurableConfigRepository`` and the providers an
``OpenedProviders`` holds. A publication changes both: the snapshot names sources, and each
source needs a provider opened from its connection, kind and mappings. The follower keeps the
providers in step with the published snapshots:

- **on this host, at once**: the chain's ``ExposureService`` is given the follower as its
  ``ConfigPublisher``. ``publish(snapshot)`` serves the snapshot and opens, replaces or
  detaches providers before it returns (opening a provider connects nothing, so it needs no
  await); the detached ones are closed by a background task;
- **on every other host sharing the database, within** ``poll_s`` **plus one sync**: ``run``
  calls ``sync`` every ``poll_s`` seconds (and at once after ``wake()``, for a host that
  LISTENs for the store's notifications). ``sync`` costs two small queries when nothing
  changed and reconciles every tenant whose published version moved.

Reconciling a tenant compares its snapshot's sources with the providers open for it: a new
source gets a provider; one whose provider would now be opened differently (kind,
connection, mappings, options, database directory) gets a new one, swapped in before the old
one is closed; a source no longer in the snapshot, or whose lifecycle is ``RETIRED``, has its
provider detached and closed — its pool holds no connection afterwards. A provider that
cannot be opened is logged by error type and retried on the next sync while the tenant's other
sources are still applied; the source stays without a provider meanwhile, so it is
unavailable (fail closed) rather than served from a connection the configuration no longer
names.

The pipeline sees all this because each tenant's ``Retriever`` (and ``DocumentFetcher``) is
handed the live per-tenant mapping ``providers_for(tenant)`` rather than a copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import LifecycleState, Source
from esra.core._durable_config import DurableConfigRepository
from esra.core._opened_providers import OpenedProviders
from esra.core._provider_registry import OpenedProvider, ProviderRequest
from esra.core.ports import SearchProvider

__all__ = ["DEFAULT_POLL_S", "ConfigFollower", "RequestFor"]

DEFAULT_POLL_S = 2.0

# Builds the request one of a snapshot's sources is opened from (its mappings are the
# snapshot's); the host adds its secrets, its allowlist, the tenant's database directory and
# the source's provider options. ``esra.starlette._bootstrap.SourcePlacement.request`` is one.
RequestFor = Callable[[ConfigSnapshot, Source], ProviderRequest]

_log = logging.getLogger(__name__)


def _opens_alike(current: ProviderRequest, wanted: ProviderRequest) -> bool:
    """Whether the open provider already is what ``wanted`` would open.

    Only what a factory opens a provider from counts: a changed name or description is
    served from the snapshot, without reopening a pool.
    """
    return (
        current.source.provider_kind == wanted.source.provider_kind
        and current.source.connection_ref == wanted.source.connection_ref
        and current.mappings == wanted.mappings
        and dict(current.options) == dict(wanted.options)
        and current.databases == wanted.databases
    )


class ConfigFollower:
    """Keeps ``providers`` in step with the snapshots ``repository`` serves.

    Args:
        repository: the host's runtime configuration, over the shared ``WorkspaceStore``.
        providers: the host's providers; the follower opens, replaces and retires them.
        request_for: builds the ``ProviderRequest`` of one of a snapshot's sources.
        poll_s: how often ``run`` looks for publications made on other hosts.
    """

    def __init__(
        self,
        repository: DurableConfigRepository,
        providers: OpenedProviders,
        *,
        request_for: RequestFor,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        if not poll_s > 0:
            msg = "poll_s must be positive"
            raise ValueError(msg)
        self._repository = repository
        self._providers = providers
        self._request_for = request_for
        self._poll_s = poll_s
        # Tenants reconciled at least once, and those with a source left to retry.
        self._followed: set[str] = set()
        self._retry: set[str] = set()
        # Bumped by each publication applied here, so a sync that loaded a tenant's snapshot
        # before it does not then put the older snapshot's providers back.
        self._generation: dict[str, int] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._sync_lock = asyncio.Lock()
        self._wake = asyncio.Event()

    @property
    def poll_s(self) -> float:
        """The polling interval: a publication on another host is served within it plus one
        sync."""
        return self._poll_s

    def providers_for(self, tenant_id: str) -> Mapping[str, SearchProvider]:
        """The tenant's providers by source id, live: hand it to the tenant's ``Retriever``."""
        return self._providers.tenant(tenant_id)

    def publish(self, snapshot: ConfigSnapshot) -> None:
        """``ConfigPublisher``: serve ``snapshot`` and its providers before returning.

        The chain calls this right after storing the publication. Providers replaced or
        retired are closed by a background task (``wait_closed`` awaits it).
        """
        self._repository.publish(snapshot)
        tenant_id = snapshot.tenant_id
        self._generation[tenant_id] = self._generation.get(tenant_id, 0) + 1
        detached = self._reconcile(snapshot)
        if detached:
            task = asyncio.get_running_loop().create_task(
                self._close(tenant_id, detached), name=f"esra-close-providers-{tenant_id}"
            )
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def sync(self) -> frozenset[str]:
        """Apply every publication not applied yet; return the tenants reconciled.

        Raises:
            Exception: whatever the store raised while listing the published versions
                (``run`` logs it and tries again on its next tick).
        """
        async with self._sync_lock:
            versions = await self._repository.current_versions()
            due = set(self._repository.stale(versions))
            due.update(tenant for tenant in versions if tenant not in self._followed)
            due.update(self._retry)
            reconciled: set[str] = set()
            for tenant_id in sorted(due):
                if await self._sync_tenant(tenant_id, versions):
                    reconciled.add(tenant_id)
            return frozenset(reconciled)

    async def run(self, stop: asyncio.Event) -> None:
        """Sync every ``poll_s`` (or on ``wake()``) until ``stop`` is set; never raises for a
        failed sync, which is logged by type and retried on the next tick."""
        while not stop.is_set():
            # Cleared before the sync, not after the pause: a wake arriving during the sync
            # makes the pause end at once, so it is never lost.
            self._wake.clear()
            try:
                await self.sync()
            except Exception as exc:
                _log.warning(
                    "applying published configuration failed (%s); retrying in %s s",
                    type(exc).__name__,
                    self._poll_s,
                )
                _log.debug("the failed configuration sync", exc_info=True)
            await self._pause(stop)
        await self.wait_closed()

    def wake(self) -> None:
        """Make ``run`` sync now instead of at its next tick (a notification arrived)."""
        self._wake.set()

    async def wait_closed(self) -> None:
        """Wait until every provider detached so far has been closed."""
        while self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def _pause(self, stop: asyncio.Event) -> None:
        stopped = asyncio.ensure_future(stop.wait())
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait(
                {stopped, woken}, timeout=self._poll_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (stopped, woken):
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter

    async def _sync_tenant(self, tenant_id: str, versions: Mapping[str, int]) -> bool:
        generation = self._generation.get(tenant_id, 0)
        try:
            version, published = await self._repository.load(tenant_id, versions)
            snapshot = published
            if snapshot is None:
                snapshot = await self._repository.fallback_snapshot(tenant_id)
        except Exception as exc:
            self._retry.add(tenant_id)
            _log.warning(
                "loading the published configuration of tenant %s failed (%s); retrying",
                tenant_id,
                type(exc).__name__,
            )
            return False
        if self._generation.get(tenant_id, 0) != generation:
            # A publication made here meanwhile was applied already; it is at least as new.
            return False
        if snapshot is None:
            self._repository.adopt(tenant_id, version, published)
            self._followed.add(tenant_id)
            return False
        detached = self._reconcile(snapshot)
        # Nothing is awaited between the two: an invocation sees the new snapshot only with
        # its providers, never a new source listed before its provider is open.
        self._repository.adopt(tenant_id, version, published)
        await self._close(tenant_id, detached)
        return True

    def _reconcile(self, snapshot: ConfigSnapshot) -> list[tuple[str, OpenedProvider]]:
        """Make the tenant's providers match ``snapshot``; return the ones taken out.

        Awaits nothing, so no invocation sees a half-applied publication.
        """
        tenant_id = snapshot.tenant_id
        self._providers.tenant(tenant_id)
        wanted = {
            source.id: source
            for source in snapshot.sources
            if source.lifecycle is not LifecycleState.RETIRED
        }
        detached: list[tuple[str, OpenedProvider]] = []
        for source_id in sorted(self._providers.source_ids(tenant_id) - wanted.keys()):
            gone = self._providers.detach(tenant_id, source_id)
            if gone is not None:
                detached.append((source_id, gone))
        failed = False
        for source in wanted.values():
            try:
                replaced = self._open(snapshot, source)
            except Exception as exc:
                failed = True
                _log.warning(
                    "opening the provider of source %s (tenant %s) failed (%s); it is "
                    "unavailable until the next sync opens it",
                    source.id,
                    tenant_id,
                    type(exc).__name__,
                )
                _log.debug("the failed provider open", exc_info=True)
                # Fail closed: never keep serving a connection the configuration no longer names.
                replaced = self._providers.detach(tenant_id, source.id)
            if replaced is not None:
                detached.append((source.id, replaced))
        self._followed.add(tenant_id)
        if failed:
            self._retry.add(tenant_id)
        else:
            self._retry.discard(tenant_id)
        return detached

    def _open(self, snapshot: ConfigSnapshot, source: Source) -> OpenedProvider | None:
        """Open ``source``'s provider unless the open one matches; return the one replaced."""
        request = self._request_for(snapshot, source)
        current = self._providers.request_of(snapshot.tenant_id, source.id)
        if current is not None and _opens_alike(current, request):
            return None
        return self._providers.replace(request)

    async def _close(self, tenant_id: str, detached: list[tuple[str, OpenedProvider]]) -> None:
        for source_id, provider in detached:
            try:
                await provider.close()
            except Exception as exc:
                _log.warning(
                    "closing the provider of source %s (tenant %s) failed (%s)",
                    source_id,
                    tenant_id,
                    type(exc).__name__,
                )

    def __repr__(self) -> str:
        return f"ConfigFollower(poll_s={self._poll_s!r}, tenants={sorted(self._followed)!r})"
