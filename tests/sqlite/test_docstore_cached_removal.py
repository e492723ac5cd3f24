"""A document taken out of retrieval is never served again from the result cache.

Seed 004: soft-deleted documents and documents not Indexed are "excluded structurally", so a
caller can never receive them. With the result cache on, a response computed while the
document was searchable carried its title and fragment for the cache's TTL after an operator
deleted it (found by a hostile review of shared state). The store's management service now
renews the tenant's content generation, which every result-cache key carries, before a
delete or re-index returns. Real store, real provider, the whole pipeline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest

from esra.core._context import CallerIdentity, InvocationContext
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.management import DATA_MANAGE, DocumentStoreService, Operator
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.config import CapabilityLimits
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemoryCache
from esra.llm import LocalModel
from esra.sqlite import (
    DEFAULT_SCOPE_CLAIM,
    SqliteDocumentRepository,
    SqliteFts5Provider,
    store_source,
)
from tests.sqlite.test_docstore_search import ACME, APP, SLUG, _snapshot

QUESTION = "quokka travel budget"
FILES = [
    ("quokka.txt", b"The quokka travel budget covers two trips a year.\n"),
    ("wombat.txt", b"The wombat travel budget covers one trip a year.\n"),
]
MANAGER = Operator(subject="manager", tenant_id=ACME, roles=frozenset({DATA_MANAGE}))


@attrs.define
class World:
    retriever: Retriever
    service: DocumentStoreService
    ids: dict[str, str]
    provider: SqliteFts5Provider

    async def titles(self, correlation_id: str) -> list[str]:
        context = InvocationContext(
            tenant_id=ACME,
            client_app_id=APP,
            caller=CallerIdentity(subject="tester", claims={DEFAULT_SCOPE_CLAIM: ("hr",)}),
            exposure_slug=SLUG,
            correlation_id=correlation_id,
        )
        response = await self.retriever.retrieve(context, QUESTION)
        return sorted(item.title for item in response.results)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock, audit, cache = FakeClock(), InMemoryAuditSink(), InMemoryCache(FakeClock())
    path = tmp_path / "store.db"
    repository = SqliteDocumentRepository(path)
    await repository.initialize()
    outcomes = await upload_files(repository, ACME, FILES, scope="hr", clock=clock)
    await IngestionWorker(repository, worker_id="w", clock=clock).run_turn()
    snapshot = _snapshot(ACME)
    (capability,) = snapshot.capabilities
    cached = attrs.evolve(capability, limits=CapabilityLimits(result_cache_ttl_s=3600.0))
    _, mapping = store_source(ACME)
    provider = SqliteFts5Provider(path, mappings=(mapping,))
    retriever = Retriever(
        config=StaticConfigRepository([attrs.evolve(snapshot, capabilities=(cached,))]),
        providers={mapping.source_id: provider},
        model=LocalModel(),
        audit=audit,
        cache=cache,
    )
    ids = {o.filename: o.document.id for o in outcomes if o.document is not None}
    service = DocumentStoreService(repository, audit=audit, clock=clock, cache=cache)
    yield World(retriever, service, ids, provider)
    provider.close()
    await repository.close()


async def test_a_deleted_document_is_not_served_from_the_cache(world: World) -> None:
    assert await world.titles("first") == ["quokka.txt", "wombat.txt"]
    assert await world.titles("cached") == ["quokka.txt", "wombat.txt"]  # a hit

    await world.service.delete(MANAGER, world.ids["quokka.txt"])

    assert await world.titles("after") == ["wombat.txt"]


async def test_a_document_queued_again_is_not_served_from_the_cache(world: World) -> None:
    assert await world.titles("first") == ["quokka.txt", "wombat.txt"]

    await world.service.reindex(MANAGER, world.ids["wombat.txt"])

    assert await world.titles("after") == ["quokka.txt"]  # Pending until a worker runs
