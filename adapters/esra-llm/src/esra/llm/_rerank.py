"""Reranking: a lexical-similarity score in [0, 1] for every result id the prompt gives.

``semantic = 0.6 × coverage + 0.4 × cosine``, both over light stems, with the candidates given
as the corpus for idf (``1 + ln((N + 1) / (df + 1))``):

* coverage: the idf-weighted share of the request's concepts the result holds — per concept
  the best of its stems, scaled by the stem's weight (own word 1.0, expansion 0.75, synonym
  0.5) and by where it occurs (title 1.0, fragments only 0.75); a concept's idf is that of
  its own word;
* cosine: tf-idf cosine between the request stems (at their weights) and the result, title
  tokens counted twice.

With an ``Embedder`` the score blends meaning with words: ``0.7 × cosine + 0.3 × lexical``,
where cosine is that of the request's and the result's sentence embeddings (title and
fragments, clamped to [0, 1]) and lexical is the score above min-max normalised over the
candidates, so the words can only reorder results the embedding finds about equally close.

Every id appears once, in prompt order; text inside a result is only ever counted or embedded,
never read as instructions.
"""

from __future__ import annotations

import json
import math
from collections import Counter

from esra.core.prompts import Prompt
from esra.llm._reference import items, string, strings
from esra.llm._request import analyse
from esra.llm._text import STOPWORDS, stem, tokens
from esra.llm.embeddings import Embedder, cosine

__all__ = ["SEMANTIC_SHARE", "answer_rerank", "blend_scores", "score_results"]

_TITLE_WEIGHT = 2
_FRAGMENT_ONLY = 0.75
_COVERAGE_SHARE = 0.6
SEMANTIC_SHARE = 0.7


def _bag(text: str) -> Counter[str]:
    return Counter(stem(w) for w in tokens(text) if w not in STOPWORDS)


def score_results(prompt: Prompt) -> list[tuple[str, float]]:
    """Return ``(result id, semantic score)`` per distinct readable result, in prompt order."""
    analysis = analyse(prompt.request)
    request = analysis.weights
    concepts = analysis.concepts
    results: dict[str, tuple[Counter[str], Counter[str]]] = {}
    for _, obj in items(prompt):
        result_id = string(obj, "id")
        if result_id and result_id not in results:
            title = _bag(string(obj, "title"))
            body = _bag(" ".join(strings(obj, "fragments")))
            results[result_id] = (title, body)
    count = len(results)
    df: Counter[str] = Counter()
    for title, body in results.values():
        df.update(set(title) | set(body))

    def idf(key: str) -> float:
        return 1.0 + math.log((count + 1) / (df[key] + 1))

    idfs = {key: idf(key) for key in request}
    total = sum(idfs[concept[0][0]] for concept in concepts)
    query_norm = math.sqrt(sum((weight * idfs[key]) ** 2 for key, weight in request.items()))
    scores: list[tuple[str, float]] = []
    for result_id, (title, body) in results.items():
        if not total:
            scores.append((result_id, 0.0))
            continue
        covered = sum(
            idfs[concept[0][0]]
            * max(
                (
                    w * (1.0 if key in title else _FRAGMENT_ONLY)
                    for key, w in concept
                    if key in title or key in body
                ),
                default=0.0,
            )
            for concept in concepts
        )
        doc = {key: _TITLE_WEIGHT * n for key, n in title.items()}
        for key, n in body.items():
            doc[key] = doc.get(key, 0) + n
        doc_vector = {key: n * idf(key) for key, n in doc.items()}
        doc_norm = math.sqrt(sum(v * v for v in doc_vector.values()))
        dot = sum(weight * idfs[key] * doc_vector.get(key, 0.0) for key, weight in request.items())
        cosine = dot / (doc_norm * query_norm) if doc_norm and query_norm else 0.0
        score = _COVERAGE_SHARE * covered / total + (1 - _COVERAGE_SHARE) * cosine
        scores.append((result_id, round(min(1.0, max(0.0, score)), 6)))
    return scores


def _min_max(values: list[float]) -> list[float]:
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high == low:
        # Nothing to spread: every candidate keeps its own (already 0..1) score.
        return values
    return [(v - low) / (high - low) for v in values]


def _result_texts(prompt: Prompt) -> dict[str, str]:
    texts: dict[str, str] = {}
    for _, obj in items(prompt):
        result_id = string(obj, "id")
        if result_id and result_id not in texts:
            parts = [string(obj, "title"), *strings(obj, "fragments")]
            texts[result_id] = "\n".join(p for p in parts if p)
    return texts


def blend_scores(prompt: Prompt, embedder: Embedder) -> list[tuple[str, float]]:
    """Return ``(result id, 0.7 × cosine + 0.3 × normalised lexical)`` in prompt order."""
    lexical = score_results(prompt)
    if not lexical or not prompt.request.strip():
        return lexical
    texts = _result_texts(prompt)
    request, *vectors = embedder.encode([prompt.request, *(texts[rid] for rid, _ in lexical)])
    spread = _min_max([score for _, score in lexical])
    blended: list[tuple[str, float]] = []
    for (result_id, _), words, vector in zip(lexical, spread, vectors, strict=True):
        meaning = min(1.0, max(0.0, cosine(request, vector)))
        score = SEMANTIC_SHARE * meaning + (1 - SEMANTIC_SHARE) * words
        blended.append((result_id, round(min(1.0, max(0.0, score)), 6)))
    return blended


def answer_rerank(prompt: Prompt, embedder: Embedder | None = None) -> str:
    """Answer a rerank prompt with one score per result id (blended with meaning if given)."""
    found = score_results(prompt) if embedder is None else blend_scores(prompt, embedder)
    scores = [{"id": result_id, "score": score} for result_id, score in found]
    return json.dumps({"scores": scores})
