"""OpenedProviders: every provider a process opened through the registry, closed as one.

The host composes its providers here, tenant by tenant and source by source, and hands the
live per-tenant mappings to the pipeline. ``retire`` closes one source's provider (its pool,
its file) and removes it, so a retired source stops being searchable and holds no
connection; ``aclose`` closes the rest, each exactly once, even when one close fails.

A publication applied while the host runs (``esra.core._live_config``) changes these maps in
place, without awaiting anything: ``replace`` swaps a source's provider for one opened from a
new request and ``detach`` takes one out, each handing back the provider it removed so the
caller closes it — after the swap, so no invocation ever picks up a provider being closed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from esra.core._provider_registry import OpenedProvider, ProviderRegistry, ProviderRequest
from esra.core.ports import SearchProvider

__all__ = ["OpenedProviders"]

_log = logging.getLogger(__name__)


class OpenedProviders:
    """The providers of every tenant, opened through ``registry``.

    Args:
        registry: opens each source with its kind's factory.
    """

    def __init__(self, registry: ProviderRegistry) -> None:
        self._registry = registry
        self._opened: dict[str, dict[str, OpenedProvider]] = {}
        # What the pipeline reads: per tenant, a live dict of providers by source id.
        self._providers: dict[str, dict[str, SearchProvider]] = {}
        # What each open provider was opened from, so a new publication can be compared.
        self._requests: dict[str, dict[str, ProviderRequest]] = {}

    @property
    def by_tenant(self) -> Mapping[str, Mapping[str, SearchProvider]]:
        """Per tenant, its providers by source id (live: a retired source disappears)."""
        return self._providers

    def tenant(self, tenant_id: str) -> dict[str, SearchProvider]:
        """The live providers of ``tenant_id`` (an empty dict for a tenant without any)."""
        return self._providers.setdefault(tenant_id, {})

    def open(self, request: ProviderRequest) -> SearchProvider:
        """Open ``request.source``'s provider (nothing connects yet) and track it.

        Raises:
            UnknownProviderKindError: no installed factory opens the source's kind.
            ProviderOptionError: the factory refused the source's options.
            ValueError: the source is already open for its tenant.
        """
        source = request.source
        opened = self._opened.setdefault(source.tenant_id, {})
        if source.id in opened:
            msg = f"source {source.id!r} of tenant {source.tenant_id!r} is already open"
            raise ValueError(msg)
        provider = self._registry.open(request)
        self._track(request, provider)
        return provider.provider

    def request_of(self, tenant_id: str, source_id: str) -> ProviderRequest | None:
        """The request the source's open provider was opened from (``None``: not open)."""
        return self._requests.get(tenant_id, {}).get(source_id)

    def source_ids(self, tenant_id: str) -> frozenset[str]:
        """The ids of the tenant's sources whose provider is open."""
        return frozenset(self._opened.get(tenant_id, {}))

    def replace(self, request: ProviderRequest) -> OpenedProvider | None:
        """Open ``request.source``'s provider and serve it in place of the one open before.

        The new provider is opened first: when that fails nothing changes. Returns the
        provider taken out (``None`` when the source was not open), which the caller closes.

        Raises:
            UnknownProviderKindError: no installed factory opens the source's kind.
            ProviderOptionError: the factory refused the source's options.
        """
        provider = self._registry.open(request)
        previous = self._opened.get(request.tenant_id, {}).get(request.source.id)
        self._track(request, provider)
        return previous

    def detach(self, tenant_id: str, source_id: str) -> OpenedProvider | None:
        """Stop serving one source's provider and hand it back, still open, to be closed."""
        provider = self._opened.get(tenant_id, {}).pop(source_id, None)
        if provider is None:
            return None
        self._providers.get(tenant_id, {}).pop(source_id, None)
        self._requests.get(tenant_id, {}).pop(source_id, None)
        return provider

    async def retire(self, tenant_id: str, source_id: str) -> bool:
        """Close and remove one source's provider; ``False`` when it was not open."""
        provider = self.detach(tenant_id, source_id)
        if provider is None:
            return False
        await provider.close()
        return True

    def _track(self, request: ProviderRequest, provider: OpenedProvider) -> None:
        tenant_id, source_id = request.tenant_id, request.source.id
        self._opened.setdefault(tenant_id, {})[source_id] = provider
        self._requests.setdefault(tenant_id, {})[source_id] = request
        self.tenant(tenant_id)[source_id] = provider.provider

    async def aclose(self) -> None:
        """Close every provider still open; a failing close is logged, the rest still run."""
        for tenant_id, opened in list(self._opened.items()):
            for source_id in list(opened):
                try:
                    await self.retire(tenant_id, source_id)
                except Exception:
                    _log.exception(
                        "closing the provider of source %s (tenant %s) failed",
                        source_id,
                        tenant_id,
                    )

    def __repr__(self) -> str:
        counts = {tenant: len(opened) for tenant, opened in self._opened.items()}
        return f"OpenedProviders({counts!r})"
