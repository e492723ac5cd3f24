"""OpenedProviders: every provider a process opened through the registry, closed as one.

The host composes its providers here, tenant by tenant and source by source, and hands the
live per-tenant mappings to the pipeline. ``retire`` closes one source's provider (its pool,
its file) and removes it, so a retired source stops being searchable and holds no
connection; ``aclose`` closes the rest, each exactly once, even when one close fails.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from esra.core.ports import SearchProvider
from esra.core.provider_registry import OpenedProvider, ProviderRegistry, ProviderRequest

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
        opened[source.id] = provider
        self.tenant(source.tenant_id)[source.id] = provider.provider
        return provider.provider

    async def retire(self, tenant_id: str, source_id: str) -> bool:
        """Close and remove one source's provider; ``False`` when it was not open."""
        provider = self._opened.get(tenant_id, {}).pop(source_id, None)
        if provider is None:
            return False
        self._providers.get(tenant_id, {}).pop(source_id, None)
        await provider.close()
        return True

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
