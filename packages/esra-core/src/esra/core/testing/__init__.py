"""Fakes and in-memory implementations of every core port, for tests and embedders."""

from esra.core.testing.breakers import InMemoryBreakerBroadcast
from esra.core.testing.docstore import InMemoryDocumentRepository
from esra.core.testing.fakes import (
    FakeClock,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySecretStore,
    StaticHostAllowlist,
)
from esra.core.testing.model import FakeLanguageModel, Responder
from esra.core.testing.provider import InMemorySearchProvider

__all__ = [
    "FakeClock",
    "FakeLanguageModel",
    "InMemoryAuditSink",
    "InMemoryBreakerBroadcast",
    "InMemoryCache",
    "InMemoryConfigRepository",
    "InMemoryDocumentRepository",
    "InMemoryQuotaStore",
    "InMemorySearchProvider",
    "InMemorySecretStore",
    "Responder",
    "StaticHostAllowlist",
]
