"""The ports the core depends on. Adapters implement them; ``esra.core.testing`` fakes them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

import attrs

from esra.core._audit.record import AuditRecord
from esra.core._clock import Clock
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import (
    ProviderCapabilities,
    RenderedLengths,
    TextIndexKind,
    TextRendering,
    ValidatedQuery,
)
from esra.core._prompts.model import Prompt
from esra.core._query import ResultRow

__all__ = [
    "AuditSink",
    "BreakerBroadcast",
    "BreakerOpening",
    "Cache",
    "Clock",
    "ConfigRepository",
    "HostAllowlist",
    "LanguageModel",
    "ProviderCapabilities",
    "QuotaStore",
    "RenderedLengths",
    "RenderedStatement",
    "SearchProvider",
    "SecretStore",
    "StatementRenderer",
    "TextIndexKind",
    "TextRendering",
    "WritableSecretStore",
]


@runtime_checkable
class LanguageModel(Protocol):
    """**Protocol:** completes a prompt assembled by the core and returns the raw answer text.

    The core parses and validates every answer against the task's output contract; adapters
    only transport.
    """

    async def complete(self, prompt: Prompt) -> str:
        """Return the model's raw text answer to ``prompt``."""
        ...


@runtime_checkable
class SearchProvider(Protocol):
    """**Protocol:** executes validator-issued queries against one source, read-only.

    Implementations must refuse anything that is not a ``ValidatedQuery`` issued by the
    validator (``esra.core._pipeline.values.ensure_validated``), carry every value as a bind
    parameter, cap rows in the statement, order by score descending then key ascending, and
    raise only ``ProviderError`` with one of the sixteen codes.
    """

    @property
    def capabilities(self) -> ProviderCapabilities:
        """The strategies, operators and text-index kind this provider supports."""
        ...

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        """Run ``query`` within ``timeout_s`` seconds (server-side where the engine allows)."""
        ...

    async def health(self) -> SourceHealth:
        """Report the source's health for scope resolution."""
        ...


@attrs.frozen
class RenderedStatement:
    """A statement as a provider would send it: its text and its parameters' names.

    Never the values: operator explain shows how a query was rendered, and a value may be as
    sensitive as the prompt or a claim.
    """

    text: str
    parameters: tuple[str, ...]


@runtime_checkable
class StatementRenderer(Protocol):
    """**Protocol:** a provider that can show the statement it would run for a query.

    Optional: operator explain shows a query's statement when its provider implements this,
    and says it was not rendered otherwise. Rendering never executes anything.
    """

    def render_statement(self, query: ValidatedQuery) -> RenderedStatement:
        """The statement ``execute`` would send for ``query``, without its values."""
        ...


class SecretStore(Protocol):
    """**Protocol:** resolves a tenant-scoped secret reference; never crosses tenants."""

    async def resolve(self, tenant_id: str, reference: str) -> str:
        """Return the secret, or raise ``ProviderError(SECRET_UNRESOLVED)``."""
        ...


class WritableSecretStore(SecretStore, Protocol):
    """**Protocol:** a ``SecretStore`` that can also create and rotate secrets."""

    async def check_put(self, tenant_id: str, reference: str, value: str) -> None:
        """Raise what ``put`` would raise for this write's own content; write nothing.

        The admin chain asks before it records a write, so a write the store refuses (an
        external reference, a value it cannot hold) leaves the configuration unchanged.

        Raises:
            ConfigurationError: ``put`` would refuse the write whatever the store's state.
        """
        ...

    async def put(self, tenant_id: str, reference: str, value: str) -> None:
        """Create, or replace (rotate), the secret ``reference`` of ``tenant_id``.

        Raises:
            ConfigurationError: the write is refused (``check_put`` says so beforehand).
        """
        ...


class HostAllowlist(Protocol):
    """**Protocol:** answers whether a tenant may open a connection to ``host:port``."""

    async def is_allowed(self, tenant_id: str, host: str, port: int) -> bool:
        """Return whether the outbound connection is allowed for this tenant."""
        ...


class AuditSink(Protocol):
    """**Protocol:** records audit records; failures and denials are recorded too."""

    async def record(self, record: AuditRecord) -> None:
        """Persist or forward ``record``."""
        ...


class Cache(Protocol):
    """**Protocol:** a byte cache with TTL. Keys are built by the core, never by an adapter."""

    async def get(self, key: str) -> bytes | None:
        """Return the cached value for ``key`` or ``None``.

        Performance fails open: a cache that cannot answer within its bounded time answers
        ``None`` (and ``set`` does nothing), so the invocation runs uncached.
        """
        ...

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store ``value`` under ``key`` for ``ttl_s`` seconds."""
        ...


class QuotaStore(Protocol):
    """**Protocol:** consumes from a per-caller hourly character budget.

    Governance fails closed: a store that cannot answer (unreachable, timed out) raises
    ``esra.core.exceptions.QuotaUnavailableError`` within a bounded time, and never grants.
    """

    async def consume(self, tenant_id: str, caller: str, amount: int, limit: int) -> bool:
        """Consume ``amount`` if it fits within ``limit`` this hour; return whether it did.

        Raises:
            QuotaUnavailableError: the store could not answer.
        """
        ...


@attrs.frozen
class BreakerOpening:
    """One source's circuit breaker opened on some runtime instance, for ``open_for_s``
    more seconds (what is left of its reset time when the opening is read)."""

    tenant_id: str
    source_id: str
    open_for_s: float


class BreakerBroadcast(Protocol):
    """**Protocol:** shares circuit-breaker openings between runtime instances.

    A source failing on one instance opens its breaker on all: the instance whose breaker
    opened calls ``opened``; every instance reads ``openings`` and opens its own breaker for
    what is left. Failures are still counted per instance, and each instance makes its own
    half-open trial. Sharing is a resilience aid, so it fails open: ``opened`` never raises
    (a lost broadcast leaves the other instances to find the failures themselves).
    """

    async def opened(self, tenant_id: str, source_id: str, open_for_s: float) -> None:
        """Tell every instance that the breaker of ``source_id`` opened for ``open_for_s``."""
        ...

    def openings(self) -> AsyncIterator[BreakerOpening]:
        """The openings still in force when the iteration starts, then each new one as it
        is announced, until the iteration is closed (it reconnects by itself)."""
        ...


class ConfigRepository(Protocol):
    """**Protocol:** tenant-scoped, versioned configuration."""

    async def snapshot(self, tenant_id: str) -> ConfigSnapshot | None:
        """Return the tenant's current configuration snapshot, if it has one."""
        ...
