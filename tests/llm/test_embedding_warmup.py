"""Embeddings ready before they are needed: warming the cache, and a rerank under a deadline.

``LocalModel.warm_embeddings`` embeds what a later rerank of the same records looks up, so
the first question over a corpus encodes no more than its own request. A rerank whose
encoder is too slow for the invocation runs in a worker thread the core can time out: the
results come back in search order with ``ESRA_RERANK_FALLBACK``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

from esra.core._pipeline.rerank import record_item
from esra.core._query import RowValue
from esra.core._response import ResponseStatus, RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.codes import WarningCode
from esra.core.config import CapabilityLimits
from esra.core.prompts import RerankItem, build_rerank_prompt
from esra.core.testing import (
    FakeClock,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from esra.llm import EmbeddingCache, LocalModel
from esra.llm._embeddings import Embedder
from tests.core.factories import (
    make_capability,
    make_context,
    make_mapping,
    make_snapshot,
    make_source,
)
from tests.llm._embedders import CountingEmbedder

LONG_BODY = " ".join(f"word{i}" for i in range(300)) + " leave"
ITEMS = (
    RerankItem("", "HR", "Leave policy", ("Annual leave is 28 days a year.",)),
    RerankItem("", "HR", "Long handbook page", (LONG_BODY,)),
    RerankItem("", "IT", "Printer", ("The printer on floor 3 jams.",)),
)
ROWS: dict[str, list[dict[str, RowValue]]] = {
    "m-s-1": [
        {"col_id": 1, "col_title": "Annual leave policy", "col_body": "Employees get 28 days"},
        {"col_id": 2, "col_title": "Leave request form", "col_body": "Request leave early"},
        {"col_id": 3, "col_title": "Travel policy", "col_body": "Book travel via the desk"},
    ],
}


def _rerank(model: LocalModel, request: str) -> str:
    items = [attrs.evolve(item, result_id=f"r_{n}") for n, item in enumerate(ITEMS)]
    return model.answer(build_rerank_prompt(request, items, model_profile="p"))


def test_a_warmed_cache_leaves_only_the_request_to_encode(tmp_path: Path) -> None:
    """After warming, a rerank of the same records sends the encoder its request alone."""
    inner = CountingEmbedder()
    with EmbeddingCache(inner, tmp_path / "v.sqlite") as cache:
        model = LocalModel(embedder=cache)
        warmed = model.warm_embeddings(ITEMS)
        assert warmed == len(inner.encoded) > len(ITEMS)  # the long page adds windows
        assert "warm up" not in inner.encoded
        inner.calls.clear()
        _rerank(model, "how much annual leave")
        assert inner.calls == [["how much annual leave"]]


def test_the_cache_changes_no_answer(tmp_path: Path) -> None:
    """Through the cache, cold or warm, the rerank answers as with the bare encoder."""
    bare = _rerank(LocalModel(embedder=CountingEmbedder()), "annual leave")
    with EmbeddingCache(CountingEmbedder(), tmp_path / "v.sqlite") as cache:
        model = LocalModel(embedder=cache)
        assert _rerank(model, "annual leave") == bare
        assert _rerank(model, "annual leave") == bare
    assert bare != _rerank(LocalModel(), "annual leave")  # the embedder does take part


def test_warming_again_embeds_nothing(tmp_path: Path) -> None:
    """What the file holds is not encoded again, by a warm-up or by another process."""
    with EmbeddingCache(CountingEmbedder(), tmp_path / "v.sqlite") as cache:
        assert LocalModel(embedder=cache).warm_embeddings(ITEMS) > 0
    inner = CountingEmbedder()
    with EmbeddingCache(inner, tmp_path / "v.sqlite") as cache:
        assert LocalModel(embedder=cache).warm_embeddings(iter(ITEMS)) == 0
    assert inner.calls == []


def test_warming_another_embedder_encodes_every_text_in_batches() -> None:
    """Without a cache, every text the rerank would embed is encoded once (filling the
    embedder's own memory, if it has one) and counted."""
    inner = CountingEmbedder()
    many = [RerankItem("", "S", f"Record {i}", (f"Body of record {i}.",)) for i in range(300)]
    assert LocalModel(embedder=inner).warm_embeddings(many) == 300
    assert len(inner.encoded) == 300
    assert all(len(call) <= 256 for call in inner.calls)


def test_warming_a_model_without_an_embedder_is_refused() -> None:
    """Nothing to warm: a ValueError says so."""
    with pytest.raises(ValueError, match="no embedder"):
        LocalModel().warm_embeddings(ITEMS)


def _retriever(model: LocalModel, *, timeout_s: float = 20.0) -> Retriever:
    capability = attrs.evolve(
        make_capability(["s-1"]),
        limits=CapabilityLimits(invocation_timeout_s=timeout_s, attempt_timeout_s=timeout_s),
    )
    snapshot = make_snapshot([make_source("s-1")], capability=capability)
    return Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS)},
        model=model,
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )


async def test_records_warmed_at_ingest_serve_the_first_question(tmp_path: Path) -> None:
    """A host warms the cache from its records (``record_item``); the first invocation over
    them then encodes only its request."""
    mapping = make_mapping("m-s-1", source_id="s-1")
    exposure_chars = make_snapshot([make_source("s-1")]).exposures[0].fragment_chars
    records: list[dict[str, RowValue]] = [
        {"title": r["col_title"], "body": r["col_body"]} for r in ROWS["m-s-1"]
    ]
    inner = CountingEmbedder()
    with EmbeddingCache(inner, tmp_path / "v.sqlite") as cache:
        model = LocalModel(embedder=cache)
        items = (record_item(mapping, r, fragment_chars=exposure_chars) for r in records)
        assert model.warm_embeddings(items) == len(records)
        inner.calls.clear()
        response = await _retriever(model).retrieve(make_context(), "leave policy")
    assert response.status is ResponseStatus.COMPLETE
    assert response.results
    assert inner.calls == [["leave policy"]]


class BlockingEmbedder:
    """Encodes nothing until released: an encoder far too slow for the invocation."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.started.set()
        # Bounded, so a regression that blocks the event loop fails instead of hanging.
        self.release.wait(timeout=30)
        return [[1.0] for _ in texts]


async def _retrieve_blocked(embedder: BlockingEmbedder) -> RetrievalResponse:
    retriever = _retriever(LocalModel(embedder=embedder), timeout_s=1.0)
    try:
        return await retriever.retrieve(make_context(), "leave policy")
    finally:
        embedder.release.set()  # let the worker thread finish


async def test_a_stuck_embedding_rerank_falls_back_to_the_search_order() -> None:
    """The encoder never returns in time: the caller still gets the results, in search
    order, with ESRA_RERANK_FALLBACK, not an empty deadline response."""
    embedder = BlockingEmbedder()
    response = await _retrieve_blocked(embedder)
    assert embedder.started.is_set()
    assert response.results
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_RERANK_FALLBACK]
    lexical = await _retriever(LocalModel(embedder=_Failing())).retrieve(
        make_context(), "leave policy"
    )
    assert [r.title for r in response.results] == [r.title for r in lexical.results]


class _Failing:
    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("encoder down")


def test_the_fakes_meet_the_port() -> None:
    """Both doubles are ``Embedder``s."""
    assert isinstance(BlockingEmbedder(), Embedder)
    assert isinstance(_Failing(), Embedder)
