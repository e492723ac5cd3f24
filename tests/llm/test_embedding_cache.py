"""Tests for ``EmbeddingCache``: vectors on disk, keyed by hash, bounded, shared safely."""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from esra.core.prompts import RerankItem, build_rerank_prompt
from esra.llm import EmbeddingCache, LocalModel
from esra.llm import _embedding_cache as module
from esra.llm._embeddings import Embedder
from tests.llm._embedders import CountingEmbedder, vector

SECRET = "Salary review for Ana Pérez: 98,500 EUR"


def _cache(
    path: Path,
    inner: Embedder | None = None,
    *,
    model_id: str | None = None,
    max_entries: int = module.DEFAULT_MAX_ENTRIES,
) -> EmbeddingCache:
    return EmbeddingCache(
        inner or CountingEmbedder(),
        path / "vectors.sqlite",
        model_id=model_id,
        max_entries=max_entries,
    )


def test_the_cache_is_an_embedder(tmp_path: Path) -> None:
    """It meets the ``Embedder`` protocol, so a LocalModel takes it as its embedder."""
    with _cache(tmp_path) as cache:
        assert isinstance(cache, Embedder)
        assert isinstance(cache.without_storing(()), Embedder)


def test_only_misses_reach_the_inner_embedder_once_each_in_one_batch(tmp_path: Path) -> None:
    """Repeats within and across calls are served from the file; the rest go in one batch."""
    inner = CountingEmbedder()
    with _cache(tmp_path, inner) as cache:
        assert cache.encode(["a", "b", "a"]) == [vector("a"), vector("b"), vector("a")]
        assert inner.calls == [["a", "b"]]
        assert (cache.hits, cache.misses) == (0, 2)
        assert cache.encode(["b", "c", "d"]) == [vector("b"), vector("c"), vector("d")]
        assert inner.calls == [["a", "b"], ["c", "d"]]
        assert (cache.hits, cache.misses) == (1, 4)
        assert cache.encode(["d", "a"]) == [vector("d"), vector("a")]
        assert len(inner.calls) == 2
        assert (cache.hits, cache.misses) == (3, 4)
        assert cache.encode([]) == []
        assert len(cache) == 4


def test_vectors_come_back_as_stored_also_the_first_time(tmp_path: Path) -> None:
    """Stored as float32: a fresh vector is returned rounded like a read one, so a text's
    vector never depends on whether it was cached."""

    class Precise(CountingEmbedder):
        def encode(self, texts: Sequence[str]) -> list[list[float]]:
            super().encode(texts)
            return [[0.1, 0.2, 0.3] for _ in texts]

    with _cache(tmp_path, Precise()) as cache:
        (first,) = cache.encode(["x"])
        (again,) = cache.encode(["x"])
    assert first == again
    assert first == pytest.approx([0.1, 0.2, 0.3], abs=1e-7)


def test_a_restarted_process_reuses_the_vectors_on_disk(tmp_path: Path) -> None:
    """A second cache on the same file, with a fresh encoder, encodes nothing already held."""
    with _cache(tmp_path) as first:
        first.encode(["alpha", "beta"])
    inner = CountingEmbedder()
    with _cache(tmp_path, inner) as second:
        assert second.encode(["beta", "alpha", "gamma"]) == [
            vector("beta"),
            vector("alpha"),
            vector("gamma"),
        ]
    assert inner.calls == [["gamma"]]


def test_another_model_never_reads_these_vectors(tmp_path: Path) -> None:
    """Keys include the model identity: a different model on the same file misses."""
    with _cache(tmp_path) as first:
        first.encode(["alpha"])
    inner = CountingEmbedder()
    with _cache(tmp_path, inner, model_id="another-model/2") as other:
        other.encode(["alpha"])
        assert other.identity == "another-model/2"
    assert inner.calls == [["alpha"]]


def _file_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())


def test_the_file_never_holds_the_text(tmp_path: Path) -> None:
    """Only a SHA-256 key, the float32 vector and a use counter are stored, never the text."""
    texts = [SECRET, "Quarterly figures for the Larkspur account", "x" * 5000]
    with _cache(tmp_path) as cache:
        cache.encode(texts)
        # While open (the WAL may hold the rows) and after closing.
        snapshot = _file_bytes(tmp_path)
    for raw in (snapshot, _file_bytes(tmp_path)):
        for text in texts:
            for encoding in ("utf-8", "utf-16-le", "utf-16-be"):
                assert text[:24].encode(encoding) not in raw
    db = sqlite3.connect(tmp_path / "vectors.sqlite")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        values = [v for t in tables for row in db.execute(f"SELECT * FROM {t}") for v in row]
        columns = [r[1] for r in db.execute("PRAGMA table_info(vectors)")]
    finally:
        db.close()
    assert columns == ["key", "vector", "used"]
    assert not any(isinstance(v, str) for v in values)
    keys = {v for v in values if isinstance(v, bytes) and len(v) == 32}
    assert len(keys) == len(texts)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_the_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """Vectors are derived from governed records: the file is created 0600."""
    with _cache(tmp_path) as cache:
        cache.encode(["alpha"])
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes["vectors.sqlite"] == 0o600
    assert all(mode == 0o600 for mode in modes.values())


def test_unstored_texts_are_encoded_and_forgotten(tmp_path: Path) -> None:
    """``without_storing`` looks texts up, encodes the missing ones, and keeps none of them."""
    inner = CountingEmbedder()
    with _cache(tmp_path, inner) as cache:
        cache.encode(["held"])
        view = cache.without_storing(["request", "held"])
        assert view.encode(["request", "held", "result"]) == [
            vector("request"),
            vector("held"),
            vector("result"),
        ]
        assert inner.calls == [["held"], ["request", "result"]]
        view.encode(["request"])
        assert inner.calls[-1] == ["request"]
        assert len(cache) == 2  # "held" and "result"


def test_the_local_model_never_stores_the_request(tmp_path: Path) -> None:
    """A rerank through the cache keeps the results' vectors and not the caller's prompt."""
    results = (
        RerankItem("r_1", "HR", "Leave policy", ("Annual leave is 28 days.",)),
        RerankItem("r_2", "IT", "Printer", ("The printer jams.",)),
    )
    request = "how many days of leave do I get"
    with _cache(tmp_path) as cache:
        LocalModel(embedder=cache).answer(
            build_rerank_prompt(request, results, model_profile="default")
        )
        assert len(cache) == len(results)
    inner = CountingEmbedder()
    with _cache(tmp_path, inner) as again:
        again.encode([request])
    assert inner.calls == [[request]]


def test_the_bound_evicts_the_least_recently_used(tmp_path: Path) -> None:
    """Past ``max_entries`` the vector used longest ago goes; a use refreshes a vector."""
    inner = CountingEmbedder()
    with _cache(tmp_path, inner, max_entries=3) as cache:
        for text in ("a", "b", "c"):
            cache.encode([text])
        cache.encode(["a"])  # now b is the least recently used
        cache.encode(["d"])
        assert len(cache) == 3
        inner.calls.clear()
        cache.encode(["a"])
        cache.encode(["c"])
        cache.encode(["d"])
        assert inner.calls == []
        cache.encode(["b"])
        assert inner.calls == [["b"]]
        assert len(cache) == 3


def test_the_bound_holds_for_one_call_larger_than_it(tmp_path: Path) -> None:
    """A call with more new texts than the bound still answers them all; the file keeps the
    bound."""
    texts = [f"t{i}" for i in range(7)]
    with _cache(tmp_path, max_entries=3) as cache:
        assert cache.encode(texts) == [vector(t) for t in texts]
        assert len(cache) == 3
        assert cache.max_entries == 3


def test_prime_fills_the_file_ahead_of_time_in_batches(tmp_path: Path) -> None:
    """``prime`` encodes what is missing, in bounded batches, and says how many were new."""
    inner = CountingEmbedder()
    texts = [f"record {i}" for i in range(600)]
    with _cache(tmp_path, inner) as cache:
        assert cache.prime(texts[:10]) == 10
        assert cache.prime(iter(texts)) == 590
        assert all(len(call) <= 256 for call in inner.calls)
        assert sorted(inner.encoded) == sorted(texts)
        assert cache.prime(texts) == 0
        inner.calls.clear()
        cache.encode(texts[:300])
        assert inner.calls == []


def test_threads_sharing_a_cache_encode_each_text_once(tmp_path: Path) -> None:
    """Concurrent calls on one cache: right vectors for all, and no text encoded twice."""
    inner = CountingEmbedder()
    texts = [f"text {i}" for i in range(40)]
    with _cache(tmp_path, inner) as cache:

        def work(n: int) -> bool:
            mine = texts[n % 8 :: 3] + texts[:5]
            return all(cache.encode(mine) == [vector(t) for t in mine] for _ in range(5))

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert all(pool.map(work, range(16)))
        assert sorted(inner.encoded) == sorted(texts)
        assert len(cache) == len(texts)


def test_separate_connections_share_the_file_safely(tmp_path: Path) -> None:
    """Caches in several threads, each with its own connection (as processes have), write to
    one file together; every answer is right and the file ends with each text once."""
    texts = [f"shared {i}" for i in range(60)]

    def work(n: int) -> bool:
        with _cache(tmp_path, max_entries=1000) as cache:
            mine = texts[n::2] + texts[: 10 + n]
            return all(cache.encode(mine) == [vector(t) for t in mine] for _ in range(3))

    with _cache(tmp_path):  # create the file first, as a deployment does at start-up
        pass
    with ThreadPoolExecutor(max_workers=6) as pool:
        assert all(pool.map(work, range(6)))
    with _cache(tmp_path) as cache:
        assert len(cache) == len(texts)


def test_a_file_that_cannot_be_written_never_fails_an_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When the file cannot be written, the vectors are still returned and the error logged
    by type, never by text; the next call stores them."""
    monkeypatch.setattr(module, "_BUSY_TIMEOUT_S", 0.05)
    inner = CountingEmbedder()
    with _cache(tmp_path, inner) as cache:
        blocker = sqlite3.connect(tmp_path / "vectors.sqlite", isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with caplog.at_level(logging.WARNING, logger="esra.llm._embedding_cache"):
                assert cache.encode([SECRET]) == [vector(SECRET)]
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        assert "not updated (OperationalError)" in caplog.text
        assert "Ana" not in caplog.text
        assert len(cache) == 0
        cache.encode([SECRET])
        assert len(cache) == 1
    assert inner.calls == [[SECRET], [SECRET]]


def test_an_unusable_configuration_is_refused(tmp_path: Path) -> None:
    """No bound, no model identity, or a file that is not a cache: refused at construction."""

    class Anonymous:
        def encode(self, texts: Sequence[str]) -> list[list[float]]:
            return [[1.0] for _ in texts]

    with pytest.raises(ValueError, match="max_entries"):
        _cache(tmp_path, max_entries=0)
    with pytest.raises(TypeError, match="model_id"):
        _cache(tmp_path, Anonymous())
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(ValueError, match="not an ESRA embedding cache"):
        EmbeddingCache(CountingEmbedder(), other)
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, just some words " * 50)
    with pytest.raises(sqlite3.DatabaseError):
        EmbeddingCache(CountingEmbedder(), text)


def test_a_closed_cache_says_so(tmp_path: Path) -> None:
    """Using a closed cache raises instead of silently encoding everything again."""
    cache = _cache(tmp_path)
    cache.close()
    cache.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        cache.encode(["a"])
    assert "vectors.sqlite" in repr(cache)
    assert os.fspath(cache.path).endswith("vectors.sqlite")
