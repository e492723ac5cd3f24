"""Embeddings ready before they are needed: documents indexed by ``esra worker`` or
``esra ingest`` have their segments warmed into the embedding cache, so the first question
finding them encodes only its request; warming never fails the indexing."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._context import CallerIdentity, InvocationContext
from esra.core._docstore.ingestion import upload_files
from esra.core._docstore.model import DocumentState
from esra.core._response import ResponseStatus
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    ConfigSnapshot,
    Exposure,
    SourceBinding,
)
from esra.core.testing import FakeClock
from esra.llm import EmbeddingCache, LocalModel
from esra.sqlite import DEFAULT_SCOPE_CLAIM, SqliteDocumentRepository, SqliteFts5Provider
from esra.sqlite import store_source as sqlite_store_source
from esra.starlette._ingest import ingest
from esra.starlette._settings import HostSettings, ModelSettings, TenantSettings
from esra.starlette._warming import StoreWarmer, open_store_warmer, store_plans
from esra.starlette._worker import run_worker
from tests.llm._embedders import CountingEmbedder

TENANT, APP, SLUG = "acme", "assistant", "docs"
QUESTION = "quokka chain tools"
MEMOS = {
    "memo-1.md": "# Workshop\n\nThe workshop stocks quokka-brand chain tools.\n",
    "memo-2.md": "# Saddles\n\nMeasure the sit bones before choosing a saddle.\n\n"
    "## Chains\n\nA worn chain wears the cassette; the quokka tool measures it.\n",
}


def _exposure(slug: str, capability_id: str, fragment_chars: int) -> Exposure:
    return Exposure(
        id=f"{slug}-exposure",
        tenant_id=TENANT,
        slug=slug,
        capability_id=capability_id,
        audience=frozenset({APP}),
        published=True,
        fragment_chars=fragment_chars,
    )


def _snapshot(*fragment_chars: int) -> ConfigSnapshot:
    """The store behind one exposure per ``fragment_chars`` (the first is ``SLUG``)."""
    source, mapping = sqlite_store_source(TENANT)
    capability = Capability(
        id="docs",
        tenant_id=TENANT,
        name="Document search",
        bindings=(SourceBinding(source.id, BindingMode.MANDATORY),),
    )
    exposures = tuple(
        _exposure(SLUG if n == 0 else f"{SLUG}{n}", capability.id, chars)
        for n, chars in enumerate(fragment_chars)
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="1",
        sources=(source,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=exposures,
        access_policies=tuple(AccessPolicy.matching(e) for e in exposures),
    )


async def _queue(path: Path) -> None:
    repository = SqliteDocumentRepository(path)
    try:
        await repository.initialize()
        outcomes = await upload_files(
            repository,
            TENANT,
            [(name, text.encode()) for name, text in MEMOS.items()],
            scope="general",
            clock=FakeClock(),
        )
        assert all(o.document is not None for o in outcomes)
    finally:
        await repository.close()


async def _ask(store: Path, model: LocalModel, snapshot: ConfigSnapshot, slug: str) -> int:
    """Ask ``QUESTION`` through the store's exposure ``slug``; return the results' count."""
    _, mapping = sqlite_store_source(TENANT)
    provider = SqliteFts5Provider(store, mappings=(mapping,))
    try:
        retriever = Retriever(
            config=StaticConfigRepository([snapshot]),
            providers={mapping.source_id: provider},
            model=model,
            audit=LoggingAuditSink(),
        )
        context = InvocationContext(
            tenant_id=TENANT,
            client_app_id=APP,
            caller=CallerIdentity(subject="tester", claims={DEFAULT_SCOPE_CLAIM: ("general",)}),
            exposure_slug=slug,
            correlation_id="warming",
        )
        response = await retriever.retrieve(context, QUESTION)
    finally:
        provider.close()
    assert response.status is ResponseStatus.COMPLETE
    return len(response.results)


async def test_a_worker_turn_warms_what_the_first_question_looks_up(tmp_path: Path) -> None:
    """After the worker indexed the memos, a question finding them through either exposure
    (two fragment sizes) sends the encoder its request alone."""
    store = tmp_path / "store.db"
    await _queue(store)
    # Both sizes hold the memos' segments whole; a longer segment is cut around the term a
    # question matched, which no warm-up can know.
    snapshot = _snapshot(400, 250)
    assert store_plans([snapshot])[TENANT].fragment_chars == (250, 400)
    inner = CountingEmbedder()
    with EmbeddingCache(inner, tmp_path / "vectors.sqlite") as cache:
        model = LocalModel(embedder=cache)
        report = await run_worker(
            {TENANT: store},
            stop=asyncio.Event(),
            worker_id="w-test",
            clock=FakeClock(),
            once=True,
            on_indexed=StoreWarmer(model, store_plans([snapshot])),
        )
        assert report.indexed == len(MEMOS)
        assert inner.encoded  # warmed at indexing
        for slug in (SLUG, f"{SLUG}1"):
            inner.calls.clear()
            assert await _ask(store, model, snapshot, slug) == len(MEMOS)
            assert inner.calls == [[QUESTION]]


async def test_an_ingest_warms_the_documents_it_indexes(tmp_path: Path) -> None:
    """``esra ingest``'s in-process indexing warms too; the cache file serves a later process."""
    store = tmp_path / "store.db"
    files = []
    for name, text in MEMOS.items():
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    snapshot = _snapshot(400)
    repository = SqliteDocumentRepository(store)
    try:
        await repository.initialize()  # a store is initialised before its first ingest
    finally:
        await repository.close()
    with EmbeddingCache(CountingEmbedder(), tmp_path / "vectors.sqlite") as cache:
        rows = await ingest(
            files,
            store=store,
            tenant_id=TENANT,
            scope="general",
            index=True,
            clock=FakeClock(),
            worker_id="ingest-test",
            err=io.StringIO(),
            on_indexed=StoreWarmer(LocalModel(embedder=cache), store_plans([snapshot])),
        )
    assert [row.state for row in rows] == ["indexed"] * len(MEMOS)
    inner = CountingEmbedder()  # the serving process: a fresh encoder over the same file
    with EmbeddingCache(inner, tmp_path / "vectors.sqlite") as cache:
        assert await _ask(store, LocalModel(embedder=cache), snapshot, SLUG) == len(MEMOS)
    assert inner.calls == [[QUESTION]]


class _Failing:
    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("encoder down: the workshop stocks quokka-brand chain tools")


async def test_a_failing_warm_up_never_fails_the_indexing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The encoder fails: every document is indexed still, and the log names the error's
    type, never its message (which could quote the document)."""
    store = tmp_path / "store.db"
    await _queue(store)
    caplog.set_level(logging.WARNING)
    warmer = StoreWarmer(LocalModel(embedder=_Failing()), store_plans([_snapshot(400)]))
    report = await run_worker(
        {TENANT: store},
        stop=asyncio.Event(),
        worker_id="w-test",
        clock=FakeClock(),
        once=True,
        on_indexed=warmer,
    )
    assert (report.indexed, report.failed, report.lost) == (len(MEMOS), 0, 0)
    assert not report.unreachable_tenants
    repository = SqliteDocumentRepository(store)
    try:
        states = [d.state for d in await repository.list(TENANT)]
    finally:
        await repository.close()
    assert states == [DocumentState.INDEXED] * len(MEMOS)
    warnings = [r.getMessage() for r in caplog.records if "after indexing" in r.getMessage()]
    assert len(warnings) == len(MEMOS)
    assert all("RuntimeError" in w and "quokka" not in w for w in warnings)


def test_only_exposures_searching_the_store_are_warmed_for() -> None:
    """An exposure whose subset leaves the store out adds no fragment size; a snapshot with
    no exposure over its store has no plan."""
    snapshot = _snapshot(400, 120)
    narrowed = attrs.evolve(snapshot.exposures[1], source_subset=frozenset())
    snapshot = attrs.evolve(snapshot, exposures=(snapshot.exposures[0], narrowed))
    assert store_plans([snapshot])[TENANT].fragment_chars == (400,)
    bare = attrs.evolve(snapshot, exposures=(), access_policies=())
    assert store_plans([bare]) == {}


def _host(tmp_path: Path, model: ModelSettings) -> HostSettings:
    tenant = TenantSettings(snapshot=_snapshot(400), databases=tmp_path)
    return HostSettings(issuers=(), tenants=(tenant,), model=model)


@pytest.mark.parametrize(
    "embeddings",
    [False, True],  # with vectors in memory only, no other process would see them
)
def test_without_a_cache_file_nothing_is_warmed(tmp_path: Path, embeddings: bool) -> None:
    """Only a local model keeping its vectors in a file warms."""
    settings = _host(tmp_path, ModelSettings(kind="local", embeddings=embeddings))
    with open_store_warmer(settings) as warmer:
        assert warmer is None


def test_a_cache_file_gives_a_warmer_closed_on_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``embeddings_cache``, the warmer's model opens that file and closes it on exit."""
    opened: list[Path] = []
    closed: list[Path] = []

    def with_embeddings(*, cache_path: Path, cache_entries: int) -> LocalModel:
        cache = EmbeddingCache(CountingEmbedder(), cache_path, max_entries=cache_entries)
        model = LocalModel(embedder=cache)

        def close() -> None:
            cache.close()
            closed.append(cache_path)

        monkeypatch.setattr(model, "close", close)
        opened.append(cache_path)
        return model

    monkeypatch.setattr(LocalModel, "with_embeddings", staticmethod(with_embeddings))
    path = tmp_path / "vectors.sqlite"
    model = ModelSettings(kind="local", embeddings=True, embeddings_cache=path)
    with open_store_warmer(_host(tmp_path, model)) as warmer:
        assert isinstance(warmer, StoreWarmer)
        assert closed == []
    assert opened == closed == [path]


def test_a_cache_that_cannot_be_opened_leaves_indexing_unwarmed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file cannot be opened: logged by type, and the worker indexes without a warmer."""

    def with_embeddings(*, cache_path: Path, cache_entries: int) -> LocalModel:
        raise OSError(f"{cache_path}: is a directory")

    monkeypatch.setattr(LocalModel, "with_embeddings", staticmethod(with_embeddings))
    model = ModelSettings(kind="local", embeddings=True, embeddings_cache=tmp_path)
    caplog.set_level(logging.WARNING, logger="esra.starlette._warming")
    with open_store_warmer(_host(tmp_path, model)) as warmer:
        assert warmer is None
    (line,) = [r.getMessage() for r in caplog.records if "without warming" in r.getMessage()]
    assert "OSError" in line
