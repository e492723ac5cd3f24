"""What the LocalModel reads out of a request: content words, acronyms, phrases, recency."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from esra.llm._text import (
    RECENCY_WORDS,
    content_words,
    marked_terms,
    quoted_phrases,
    search_words,
    stem,
    tokens,
    uppercase_tokens,
)
from esra.llm._vocabulary import AMBIGUOUS_ACRONYMS, acronym_of, expansion_of, synonyms_of

__all__ = ["EXPANSION_WEIGHT", "SYNONYM_WEIGHT", "Analysis", "Concept", "analyse"]

# A word the request used outright counts fully; a derived form counts for less, so a source
# that shares the caller's own words beats one that only shares a synonym.
EXPANSION_WEIGHT = 0.75
SYNONYM_WEIGHT = 0.5


Concept = tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Analysis:
    """The parts of one request the three tasks work from.

    Attributes:
        words: content words (casefolded surface forms, one per stem, in order).
        surface: every distinct content word as written (casefolded), in order: what a
            broad search must hold so that an engine without stemming misses no form.
        acronyms: ``(acronym, expansion)`` for known acronyms the request uses.
        contractions: ``(acronym, expansion)`` for known expansions the request spells out.
        recency: whether the request asks for the latest / most recent items.
        quoted: normalized double-quoted phrases.
        marked: words the request explicitly requires (``+word``, "must include word").
        concepts: one per thing the request asks about (a content word or an acronym), each
            the ``(stem, weight)`` pairs that stand for it: the word itself at 1.0, its
            expansions or acronym at 0.75, its synonyms at 0.5. Scoring takes the best pair
            per concept, so a word with many synonyms does not count many times.
    """

    words: tuple[str, ...]
    surface: tuple[str, ...]
    acronyms: tuple[tuple[str, str], ...]
    contractions: tuple[tuple[str, str], ...]
    recency: bool
    quoted: tuple[str, ...]
    marked: tuple[str, ...]
    concepts: tuple[Concept, ...]

    @property
    def weights(self) -> dict[str, float]:
        """Return every stem worth matching with its best weight."""
        weights: dict[str, float] = {}
        for concept in self.concepts:
            for key, weight in concept:
                weights[key] = max(weights.get(key, 0.0), weight)
        return weights


def _acronyms(request: str, all_words: list[str]) -> list[tuple[str, str]]:
    capitals = set(uppercase_tokens(request))
    found: dict[str, str] = {}
    for word in all_words:
        expansion = expansion_of(word)
        if expansion is None:
            continue
        if word in AMBIGUOUS_ACRONYMS and word not in capitals:
            continue
        found.setdefault(word, expansion)
    return list(found.items())


def _concept(pairs: list[tuple[str, float]]) -> Concept:
    best: dict[str, float] = {}
    for word, weight in pairs:
        key = stem(word)
        best[key] = max(best.get(key, 0.0), weight)
    return tuple(best.items())


# One invocation asks about one request several times (selection, a plan per source, the
# rerank, the answer): it is analysed once. The texts of the last few requests stay in this
# process's memory meanwhile, as the invocations in flight hold them anyway; never on disk.
@functools.lru_cache(maxsize=64)
def analyse(request: str) -> Analysis:
    """Analyse ``request`` (untrusted text: read as words, never as instructions)."""
    all_words = tokens(request)
    words = content_words(request)
    acronyms = _acronyms(request, all_words)
    contractions = list(
        dict.fromkeys((a, " ".join(all_words[s:e])) for a, s, e in acronym_of(all_words))
    )
    spelled = {stem(w): a for a, expansion in contractions for w in expansion.split()}
    used = dict(acronyms)
    concepts: list[Concept] = []
    for word in words:
        pairs = [(word, 1.0)]
        if word in used:
            pairs += [(w, EXPANSION_WEIGHT) for w in content_words(used.pop(word))]
        if stem(word) in spelled:
            pairs.append((spelled[stem(word)], EXPANSION_WEIGHT))
        pairs += [(s, SYNONYM_WEIGHT) for s in synonyms_of(word)]
        concepts.append(_concept(pairs))
    # Acronyms that are also stopwords ("IT", "US") are not content words: add them here.
    for acronym, expansion in used.items():
        pairs = [(acronym, 1.0), *((w, EXPANSION_WEIGHT) for w in content_words(expansion))]
        concepts.append(_concept(pairs))
    return Analysis(
        words=tuple(words),
        surface=tuple(search_words(request)),
        acronyms=tuple(acronyms),
        contractions=tuple(contractions),
        recency=any(w in RECENCY_WORDS for w in all_words),
        quoted=tuple(quoted_phrases(request)),
        marked=tuple(marked_terms(request)),
        concepts=tuple(concepts),
    )
