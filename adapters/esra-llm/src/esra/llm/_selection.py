"""Source selection: lexical relevance of the request to each candidate's business metadata.

The rule, in full:

* The request is a list of concepts (its content words and acronyms); each concept stands
  for stems with weights: 1.0 for the caller's own word, 0.75 for an acronym's expansion or
  an expansion's acronym, 0.5 for a built-in synonym.
* A source's metadata fields weigh what a match there says: name and domain tags 3.0,
  description and usage guidance 2.0, example prompts 1.5. A stem counts once per source, in
  its best field.
* Distinctiveness: each stem is multiplied by ``1 + ln(N / df)`` over the N candidates (df =
  candidates whose metadata holds it), so a word every source shares decides nothing.
* ``relevance = Σ over concepts of max over its stems (weight × field weight × idf)``; a
  concept whose stems appear in the source's exclusion guidance subtracts
  ``max(weight × 4.0 × idf)`` (one exclusion outweighs any one match).
* A source is chosen when ``relevance ≥ 1.0`` (at least one real match) **and**
  ``relevance ≥ 0.5 × the best candidate's relevance``.
* Nothing above the floor → every candidate whose exclusion guidance the request does not
  hit (``relevance ≥ 0``), in prompt order. A lexical model cannot tell "unrelated" from
  "related in words it does not know" (squealing brakes are a support problem without
  sharing a word with its description); missing the right source costs the caller more than
  one extra search, and the reranker still orders what comes back. An empty request chooses
  nothing.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from esra.core.prompts import Prompt
from esra.llm._reference import items, string, strings
from esra.llm._request import analyse
from esra.llm._text import STOPWORDS, stem, tokens

__all__ = ["MIN_RELEVANCE", "RELATIVE_THRESHOLD", "answer_selection", "score_sources"]

MIN_RELEVANCE = 1.0
RELATIVE_THRESHOLD = 0.5
EXCLUSION_WEIGHT = 4.0

_FIELD_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("name", 3.0),
    ("domain_tags", 3.0),
    ("description", 2.0),
    ("usage_guidance", 2.0),
    ("example_prompts", 1.5),
)


@functools.lru_cache(maxsize=1024)
def _stems_of(text: str) -> frozenset[str]:
    # Only ever called with a source's business metadata (configuration, never the caller's
    # request), which every selection prompt repeats: remembering its stems keeps no prompt
    # derivative and spares re-stemming the same descriptions on every call.
    return frozenset(stem(w) for w in tokens(text) if w not in STOPWORDS)


def _field_weights(source: dict[str, Any]) -> Mapping[str, float]:
    texts = tuple(
        " ".join(strings(source, key)) or string(source, key)
        if key in {"domain_tags", "example_prompts"}
        else string(source, key)
        for key, _ in _FIELD_WEIGHTS
    )
    return _weights_of(texts)


@functools.lru_cache(maxsize=256)
def _weights_of(texts: tuple[str, ...]) -> Mapping[str, float]:
    # A source's metadata fields (configuration, as for ``_stems_of``), in ``_FIELD_WEIGHTS``
    # order: each stem's best field weight, the same for every selection prompt it is in.
    weights: dict[str, float] = {}
    for text, (_, weight) in zip(texts, _FIELD_WEIGHTS, strict=True):
        for key_stem in _stems_of(text):
            weights[key_stem] = max(weights.get(key_stem, 0.0), weight)
    return MappingProxyType(weights)


def score_sources(prompt: Prompt) -> list[tuple[str, float]]:
    """Return ``(source id, relevance)`` for every readable candidate, in prompt order."""
    concepts = analyse(prompt.request).concepts
    sources = [(string(obj, "id"), obj) for _, obj in items(prompt)]
    sources = [(source_id, obj) for source_id, obj in sources if source_id]
    positive = [_field_weights(obj) for _, obj in sources]
    excluded = [_stems_of(string(obj, "exclusion_guidance")) for _, obj in sources]
    count = max(len(sources), 1)
    idfs: dict[str, float] = {}

    def idf(key: str) -> float:
        # The same few stems are asked for once per source and concept: compute each once.
        value = idfs.get(key)
        if value is None:
            df = sum(1 for fields in positive if key in fields)
            value = idfs[key] = 1.0 + math.log(count / max(df, 1))
        return value

    scores: list[tuple[str, float]] = []
    for (source_id, _), fields, exclusions in zip(sources, positive, excluded, strict=True):
        relevance = 0.0
        for concept in concepts:
            relevance += max(w * fields.get(key, 0.0) * idf(key) for key, w in concept)
            relevance -= max(
                (w * EXCLUSION_WEIGHT * idf(key) for key, w in concept if key in exclusions),
                default=0.0,
            )
        scores.append((source_id, round(relevance, 9)))
    return scores


def answer_selection(prompt: Prompt) -> str:
    """Answer a selection prompt: the relevant candidates' ids, most relevant first."""
    scores = score_sources(prompt)
    best = max((score for _, score in scores), default=0.0)
    floor = max(MIN_RELEVANCE, RELATIVE_THRESHOLD * best)
    ranked = sorted(enumerate(scores), key=lambda entry: (-entry[1][1], entry[0]))
    chosen = [source_id for _, (source_id, score) in ranked if score >= floor]
    if not chosen and analyse(prompt.request).concepts:
        chosen = [source_id for source_id, score in scores if score >= 0.0]
    return json.dumps({"sources": list(dict.fromkeys(chosen))})
