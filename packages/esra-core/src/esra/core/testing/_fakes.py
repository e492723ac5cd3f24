"""In-memory implementations of the infrastructure ports, for tests and embedders."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from esra.core._audit.record import AuditRecord
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._quota import InProcessQuotaStore
from esra.core._static_config import StaticConfigRepository
from esra.core.codes import AuditEvent, ProviderErrorCode
from esra.core.exceptions import ProviderError

__all__ = [
    "FakeClock",
    "InMemoryAuditSink",
    "InMemoryCache",
    "InMemoryConfigRepository",
    "InMemoryQuotaStore",
    "InMemorySecretStore",
    "StaticHostAllowlist",
]


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 1000.0

    def now(self) -> datetime:
        """Return the fake current time."""
        return self._now

    def monotonic(self) -> float:
        """Return the fake monotonic reading."""
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move both readings forward by ``seconds``."""
        self._now += timedelta(seconds=seconds)
        self._mono += seconds


class InMemoryAuditSink:
    """Keeps every record in a list."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def record(self, record: AuditRecord) -> None:
        """Append ``record``."""
        self.records.append(record)

    def events(self, event: AuditEvent) -> list[AuditRecord]:
        """Return the records of one event name, in order."""
        return [r for r in self.records if r.event is event]


class InMemoryCache:
    """A dict with expiry read from a clock."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self._clock = clock or FakeClock()
        self._entries: dict[str, tuple[float, bytes]] = {}

    async def get(self, key: str) -> bytes | None:
        """Return the live value under ``key``."""
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock.monotonic():
            return None
        return entry[1]

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        """Store ``value`` until ``ttl_s`` seconds from now."""
        self._entries[key] = (self._clock.monotonic() + ttl_s, value)

    def keys(self) -> list[str]:
        """Return every stored key (live or not)."""
        return list(self._entries)


class InMemorySecretStore:
    """Secrets keyed by (tenant, reference); a reference never resolves for another tenant."""

    def __init__(self, secrets: dict[tuple[str, str], str] | None = None) -> None:
        self._secrets = dict(secrets or {})

    async def resolve(self, tenant_id: str, reference: str) -> str:
        """Return the secret or raise ``ProviderError(SECRET_UNRESOLVED)``."""
        try:
            return self._secrets[(tenant_id, reference)]
        except KeyError:
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED) from None


class StaticHostAllowlist:
    """Allows exactly the (tenant, host, port) triples it was given."""

    def __init__(self, allowed: Iterable[tuple[str, str, int]] = ()) -> None:
        self._allowed = {(t, h.lower(), p) for t, h, p in allowed}

    async def is_allowed(self, tenant_id: str, host: str, port: int) -> bool:
        """Return whether the triple was configured."""
        return (tenant_id, host.lower(), port) in self._allowed


class InMemoryQuotaStore(InProcessQuotaStore):
    """``InProcessQuotaStore`` on a ``FakeClock`` by default, so tests move the hour."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        super().__init__(clock or FakeClock())


class InMemoryConfigRepository(StaticConfigRepository):
    """Holds one snapshot per tenant (``StaticConfigRepository`` under its testing name)."""

    def put(self, snapshot: ConfigSnapshot) -> None:
        """Replace the tenant's snapshot."""
        self.publish(snapshot)
