"""Fakes and in-memory implementations of every core port, for tests and embedders."""

from esra.core.testing._breakers import InMemoryBreakerBroadcast
from esra.core.testing._docstore import InMemoryDocumentRepository
from esra.core.testing._fakes import (
    FakeClock,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySecretStore,
    StaticHostAllowlist,
)
from esra.core.testing._model import FakeLanguageModel, Responder
from esra.core.testing._provider import InMemorySearchProvider
from esra.core.testing._secret_table import InMemorySecretTable
from esra.core.testing._store_states import InMemoryStoreStateTable

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
    "InMemorySecretTable",
    "InMemoryStoreStateTable",
    "Responder",
    "StaticHostAllowlist",
]
