"""Reranking: a lexical-relevance score in [0, 1] for every result id the prompt gives.

The lexical score is Okapi BM25 (``k1 = 1.2``, ``b = 0.75``, the customary defaults) over
Porter roots of the light stems, with the candidates given as the collection: ``idf = ln(1 +
(N − df + 0.5) / (df + 0.5))`` and document length relative to the candidates' mean. Title
tokens count twice (a title says what its text is about). Each of the request's concepts
contributes once — its best stem, scaled by the stem's weight (own word 1.0, expansion 0.75,
synonym 0.5) — so a word with many synonyms does not count many times. Within one source the
prompt's order (the engine's, ranked with the whole collection's statistics) is kept, its
results taking that source's BM25 scores best-first, those sharing none of the request's
words with this BM25 included (the engine matched them); across sources the BM25 scale
decides. Scores are divided by the best result's (the best scores 1.0).

With an ``Embedder`` the score blends meaning with words: ``0.7 × cosine + 0.3 × lexical``,
where cosine is that of the request's and the result's sentence embeddings (title and
fragments, clamped to [0, 1]) and lexical is the score above min-max normalised over the
candidates, so the words can only reorder results the embedding finds about equally close.
A text longer than ``_WINDOW_WORDS`` words is also embedded in overlapping windows (the
encoder reads only its first few hundred word pieces), and its cosine is the mean of the
whole text's and the best window's.

Every id appears once, in prompt order; text inside a result is only ever counted or embedded,
never read as instructions.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence

from esra.core.prompts import Prompt
from esra.llm._embeddings import Embedder, cosine
from esra.llm._reference import items, string, strings
from esra.llm._request import Concept, analyse
from esra.llm._text import STOPWORDS, root, stem, tokens

__all__ = ["SEMANTIC_SHARE", "answer_rerank", "blend_scores", "score_results"]

_TITLE_WEIGHT = 2
# BM25's customary parameters (Robertson and Zaragoza; Lucene's defaults), not fitted here.
_K1 = 1.2
_B = 0.75
SEMANTIC_SHARE = 0.7
# Long texts are also embedded in overlapping windows of this many words (see ``_windows``).
_WINDOW_WORDS = 128
_WINDOW_STRIDE = 96


# Distinct result-text words whose roots are remembered across answers (least recently used
# go first): far more than the vocabulary of the results a host reranks in a while, and at
# most a few MB of short strings.
_ROOT_CACHE_WORDS = 65_536


@functools.lru_cache(maxsize=_ROOT_CACHE_WORDS)
def _result_root(word: str) -> str:
    """The Porter root of ``word``'s light stem, remembered for the words of result texts;
    ``""`` for a stopword.

    Rooting is most of a rerank's work, and the same words recur in result after result and
    answer after answer, so they are rooted once per process rather than once per answer. Only
    single casefolded words of result texts go in (titles and fragments, already masked and
    bounded, the text the embedding cache keeps too), never the caller's request, whose stems
    are rooted per answer in ``_request_concepts``; the mapping is a pure function of the word,
    so what is cached can never change a score. Answering ``""`` for a stopword lets
    ``_roots`` drop stopwords with the same look-up: no word's root is empty (``stem`` and
    ``root`` never strip a word to nothing), so ``""`` marks stopwords and nothing else.
    """
    if word in STOPWORDS:
        return ""
    return root(stem(word))


def _roots(text: str) -> Iterator[str]:
    """The roots of ``text``'s words that are not stopwords, in order."""
    return filter(None, map(_result_root, tokens(text)))


def _document(title: str, fragments: str) -> Counter[str]:
    """A result's bag of roots: each title root counted ``_TITLE_WEIGHT`` times, each
    fragment root once, counted in one pass."""
    title_roots = list(_roots(title))
    return Counter(itertools.chain(*([title_roots] * _TITLE_WEIGHT), _roots(fragments)))


def _request_concepts(concepts: tuple[Concept, ...]) -> tuple[Concept, ...]:
    """The request's concepts on Porter roots: each root with its stems' best weight.

    The rerank matches on Porter roots of the shared light stems: "similarity" meets
    "similar", "conditions" meets "conditional". A concept's keys are light stems already;
    they are rooted here, for this answer only, so nothing of the request outlives it.
    """
    rooted_concepts = []
    for concept in concepts:
        best: dict[str, float] = {}
        for key, weight in concept:
            rooted = root(key)
            best[rooted] = max(best.get(rooted, 0.0), weight)
        rooted_concepts.append(tuple(best.items()))
    return tuple(rooted_concepts)


def score_results(prompt: Prompt) -> list[tuple[str, float]]:
    """Return ``(result id, BM25 score / best score)`` per distinct readable result, in order."""
    concepts = _request_concepts(analyse(prompt.request).concepts)
    documents: dict[str, Counter[str]] = {}
    sources: dict[str, str] = {}
    for _, obj in items(prompt):
        result_id = string(obj, "id")
        if result_id and result_id not in documents:
            sources[result_id] = string(obj, "source")
            fragments = " ".join(strings(obj, "fragments"))
            documents[result_id] = _document(string(obj, "title"), fragments)
    count = len(documents)
    df: Counter[str] = Counter()
    for document in documents.values():
        df.update(document.keys())
    lengths = {rid: sum(document.values()) for rid, document in documents.items()}
    mean_length = sum(lengths.values()) / count if count else 0.0

    def idf(key: str) -> float:
        return math.log(1.0 + (count - df[key] + 0.5) / (df[key] + 0.5))

    def saturated(tf: int, length: int) -> float:
        norm = 1.0 - _B + _B * (length / mean_length if mean_length else 1.0)
        return tf * (_K1 + 1.0) / (tf + _K1 * norm)

    idfs = {key: idf(key) for concept in concepts for key, _ in concept}
    scores: list[tuple[str, float]] = []
    for result_id, document in documents.items():
        length = lengths[result_id]
        score = sum(
            max(
                (
                    weight * idfs[key] * saturated(document[key], length)
                    for key, weight in concept
                    if document[key]
                ),
                default=0.0,
            )
            for concept in concepts
        )
        scores.append((result_id, score))
    return _in_engine_order(scores, sources)


def _in_engine_order(
    scores: list[tuple[str, float]], sources: dict[str, str]
) -> list[tuple[str, float]]:
    """Keep each source's prompt order, with the BM25 scores as the scale; best result 1.0.

    The prompt lists each source's results in its engine's order, ranked with the whole
    collection's statistics; the BM25 above knows only the candidates. So within a source the
    engine's order stands — its results take that source's BM25 scores, best score to first
    result — while across sources, whose engine scores cannot be compared, the BM25 scores on
    one scale decide.

    That holds for a result in which this BM25 finds none of the request's words too: the
    engine found it by a word, and knows better — it stems otherwise, it read the whole
    record where the prompt shows fragments, it matched a phrase or an expansion. Scoring it
    0 sank an engine's third result below its hundredth ("computerization" of a title the
    engine matched for "computerized").
    """
    by_source: dict[str, list[int]] = {}
    for position, (result_id, _) in enumerate(scores):
        by_source.setdefault(sources.get(result_id, ""), []).append(position)
    ordered = [score for _, score in scores]
    for positions in by_source.values():
        for position, score in zip(
            positions, sorted((scores[p][1] for p in positions), reverse=True), strict=True
        ):
            ordered[position] = score
    # Relative to the best result: the core blends this with a retrieval score that is min-max
    # normalised per query, so the best candidate is 1.0 on both scales; no match stays 0.
    best = max(ordered, default=0.0)
    return [
        (result_id, round(value / best, 6) if best else 0.0)
        for (result_id, _), value in zip(scores, ordered, strict=True)
    ]


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
    the text is longer than the encoder reads).
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

    scores = [
        SEMANTIC_SHARE * min(1.0, max(0.0, _closeness(request, whole, part)))
        + (1 - SEMANTIC_SHARE) * words
        for whole, part, words in zip(wholes, parts, spread, strict=True)
    ]
    return [
        (result_id, round(min(1.0, max(0.0, score)), 6))
        for (result_id, _), score in zip(lexical, scores, strict=True)
    ]


def answer_rerank(prompt: Prompt, embedder: Embedder | None = None) -> str:
    """Answer a rerank prompt with one score per result id (blended with meaning if given)."""
    found = score_results(prompt) if embedder is None else blend_scores(prompt, embedder)
    scores = [{"id": result_id, "score": score} for result_id, score in found]
    return json.dumps({"scores": scores})
