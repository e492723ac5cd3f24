"""Reranking: a lexical-similarity score in [0, 1] for every result id the prompt gives.

``semantic = 0.6 × coverage + 0.4 × cosine``, both over light stems, with the candidates given
as the corpus for idf (``1 + ln((N + 1) / (df + 1))``):

* coverage: the idf-weighted share of the request's concepts the result holds — per concept
  the best of its stems, scaled by the stem's weight (own word 1.0, expansion 0.75, synonym
  0.5) and by where it occurs (title 1.0, fragments only 0.75); a concept's idf is that of
  its own word;
* cosine: tf-idf cosine between the request stems (at their weights) and the result, title
  tokens counted twice.

Every id appears once, in prompt order; text inside a result is only ever counted, never read
as instructions.
"""

from __future__ import annotations

import json
import math
from collections import Counter

from esra.core.prompts import Prompt
from esra.llm._reference import items, string, strings
from esra.llm._request import analyse
from esra.llm._text import STOPWORDS, stem, tokens

__all__ = ["answer_rerank", "score_results"]

_TITLE_WEIGHT = 2
_FRAGMENT_ONLY = 0.75
_COVERAGE_SHARE = 0.6


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


def answer_rerank(prompt: Prompt) -> str:
    """Answer a rerank prompt with one score per result id."""
    scores = [{"id": result_id, "score": score} for result_id, score in score_results(prompt)]
    return json.dumps({"scores": scores})
