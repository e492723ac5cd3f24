"""Reranking: a lexical-similarity score in [0, 1] for every result id the prompt gives.

``semantic = 0.6 × coverage + 0.4 × cosine``, both over Porter roots of the light stems, with
the candidates given as the corpus for idf (``1 + ln((N + 1) / (df + 1))``), then divided by
the best result's score (the best result scores 1.0, a result sharing no word still 0):

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
A text longer than ``_WINDOW_WORDS`` words is also embedded in overlapping windows (the
encoder reads only its first few hundred word pieces), and its cosine is the mean of the
whole text's and the best window's. With ``_FEEDBACK_MIN_RESULTS`` results or more, the
request vector is then moved towards the ``_FEEDBACK_DOCS`` best-blended results (Rocchio
pseudo-relevance feedback) and the cosines computed again.

Every id appears once, in prompt order; text inside a result is only ever counted or embedded,
never read as instructions.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence

from esra.core.prompts import Prompt
from esra.llm._reference import items, string, strings
from esra.llm._request import Concept, analyse
from esra.llm._text import STOPWORDS, root, stem, tokens
from esra.llm.embeddings import Embedder, cosine

__all__ = ["SEMANTIC_SHARE", "answer_rerank", "blend_scores", "score_results"]

_TITLE_WEIGHT = 2
_FRAGMENT_ONLY = 0.75
_COVERAGE_SHARE = 0.6
SEMANTIC_SHARE = 0.7
# Long texts are also embedded in overlapping windows of this many words (see ``_windows``).
_WINDOW_WORDS = 128
_WINDOW_STRIDE = 96
# Pseudo-relevance feedback: the best few results move the request vector towards them.
_FEEDBACK_DOCS = 5
_FEEDBACK_WEIGHT = 1.0
_FEEDBACK_MIN_RESULTS = 4 * _FEEDBACK_DOCS


class _Roots:
    """Porter roots of light stems, memoised for one answer only.

    The rerank matches on Porter roots of the shared light stems: "similarity" meets
    "similar", "conditions" meets "conditional". The same words recur across the results, so
    each is rooted once; the memo lives as long as the answer, so no request or result text
    outlives it.
    """

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}

    def root(self, light: str) -> str:
        found = self._memo.get(light)
        if found is None:
            found = self._memo[light] = root(light)
        return found

    def bag(self, text: str) -> Counter[str]:
        return Counter(self.root(stem(w)) for w in tokens(text) if w not in STOPWORDS)

    def concept(self, concept: Concept) -> Concept:
        # A concept's keys are light stems already.
        best: dict[str, float] = {}
        for key, weight in concept:
            rooted = self.root(key)
            best[rooted] = max(best.get(rooted, 0.0), weight)
        return tuple(best.items())


def score_results(prompt: Prompt) -> list[tuple[str, float]]:
    """Return ``(result id, semantic score)`` per distinct readable result, in prompt order."""
    roots = _Roots()
    concepts = tuple(roots.concept(c) for c in analyse(prompt.request).concepts)
    request: dict[str, float] = {}
    for concept in concepts:
        for key, weight in concept:
            request[key] = max(request.get(key, 0.0), weight)
    results: dict[str, tuple[Counter[str], Counter[str]]] = {}
    for _, obj in items(prompt):
        result_id = string(obj, "id")
        if result_id and result_id not in results:
            title = roots.bag(string(obj, "title"))
            body = roots.bag(" ".join(strings(obj, "fragments")))
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
        scores.append((result_id, min(1.0, max(0.0, score))))
    # Relative to the best result: the core blends this with a retrieval score that is min-max
    # normalised per query, so the best candidate is 1.0 on both scales; no match stays 0.
    best = max((score for _, score in scores), default=0.0)
    return [(rid, round(score / best, 6) if best else 0.0) for rid, score in scores]


def _min_max(values: list[float]) -> list[float]:
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high == low:
        # Nothing to spread: every candidate keeps its own (already 0..1) score.
        return values
    return [(v - low) / (high - low) for v in values]


def _result_parts(prompt: Prompt) -> dict[str, tuple[str, str]]:
    parts: dict[str, tuple[str, str]] = {}
    for _, obj in items(prompt):
        result_id = string(obj, "id")
        if result_id and result_id not in parts:
            parts[result_id] = (string(obj, "title"), " ".join(strings(obj, "fragments")))
    return parts


def _result_texts(prompt: Prompt) -> dict[str, str]:
    texts: dict[str, str] = {}
    for _, obj in items(prompt):
        result_id = string(obj, "id")
        if result_id and result_id not in texts:
            parts = [string(obj, "title"), *strings(obj, "fragments")]
            texts[result_id] = "\n".join(p for p in parts if p)
    return texts


def _windows(title: str, body: str) -> list[str]:
    """Return overlapping windows of a long result's body, each headed by its title.

    Sentence encoders read a few hundred word pieces at most (all-MiniLM-L6-v2: 256) and drop
    the rest; windows of ``_WINDOW_WORDS`` words let the end of a long text count too. A body
    that fits gets no windows.
    """
    words = body.split()
    if len(words) <= _WINDOW_WORDS:
        return []
    windows = []
    for start in range(0, len(words), _WINDOW_STRIDE):
        window = " ".join(words[start : start + _WINDOW_WORDS])
        windows.append(f"{title}\n{window}" if title else window)
        if start + _WINDOW_WORDS >= len(words):
            break
    return windows


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else list(vector)


def _closeness(
    query: Sequence[float], whole: Sequence[float], windows: Sequence[Sequence[float]]
) -> float:
    """The cosine with the whole text, averaged with the best window's when there are any."""
    full = cosine(query, whole)
    if not windows:
        return full
    return (full + max(cosine(query, w) for w in windows)) / 2


def blend_scores(prompt: Prompt, embedder: Embedder) -> list[tuple[str, float]]:
    """Return ``(result id, 0.7 × cosine + 0.3 × normalised lexical)`` in prompt order.

    The cosine is the request's with the result's text (averaged with its best window's when
    the text is longer than the encoder reads). With at least ``_FEEDBACK_MIN_RESULTS``
    results, the request vector is then moved towards the mean of the ``_FEEDBACK_DOCS``
    best-blended results (Rocchio pseudo-relevance feedback, weight ``_FEEDBACK_WEIGHT``) and
    every cosine computed again: the request's few words gain the vocabulary of the texts
    that match it best.
    """
    lexical = score_results(prompt)
    if not lexical or not prompt.request.strip():
        return lexical
    texts = _result_texts(prompt)
    result_parts = _result_parts(prompt)
    windows = {rid: _windows(*result_parts[rid]) for rid, _ in lexical}
    extra = [w for rid, _ in lexical for w in windows[rid]]
    request, *vectors = embedder.encode(
        [prompt.request, *(texts[rid] for rid, _ in lexical), *extra]
    )
    wholes = vectors[: len(lexical)]
    rest = iter(vectors[len(lexical) :])
    parts = [[next(rest) for _ in windows[rid]] for rid, _ in lexical]
    spread = _min_max([score for _, score in lexical])

    def blend(query: Sequence[float]) -> list[float]:
        return [
            SEMANTIC_SHARE * min(1.0, max(0.0, _closeness(query, whole, part)))
            + (1 - SEMANTIC_SHARE) * words
            for whole, part, words in zip(wholes, parts, spread, strict=True)
        ]

    scores = blend(request)
    if len(lexical) >= _FEEDBACK_MIN_RESULTS:
        # Ties go to prompt order, so the same prompt always picks the same feedback.
        best = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:_FEEDBACK_DOCS]
        centroid = [
            sum(column) / len(best) for column in zip(*(wholes[i] for i in best), strict=True)
        ]
        scores = blend(
            _unit([q + _FEEDBACK_WEIGHT * c for q, c in zip(request, centroid, strict=True)])
        )
    return [
        (result_id, round(min(1.0, max(0.0, score)), 6))
        for (result_id, _), score in zip(lexical, scores, strict=True)
    ]


def answer_rerank(prompt: Prompt, embedder: Embedder | None = None) -> str:
    """Answer a rerank prompt with one score per result id (blended with meaning if given)."""
    found = score_results(prompt) if embedder is None else blend_scores(prompt, embedder)
    scores = [{"id": result_id, "score": score} for result_id, score in found]
    return json.dumps({"scores": scores})
