"""Answering: an extractive answer from the top results' sentences, citing each one's id.

The rule, in full:

* Only the first ``TOP_RESULTS`` results are read, in prompt order (the core sends them best
  first). Each result's fragment, without the ``…`` marking where it was cut, is split into
  sentences; a sentence longer than ``MAX_SENTENCE_CHARS`` is cut on a word boundary.
* A sentence scores the request concepts it holds — per concept the best of its stems'
  weights (own word 1.0, expansion 0.75, synonym 0.5) — plus ``TITLE_SHARE`` of what its
  result's title holds, so of two equally matching sentences the one under a matching title
  wins. A sentence holding no concept scores nothing, whatever its title.
* A sentence scoring under ``RELATIVE_THRESHOLD`` of the best sentence's score is left out:
  one shared word does not earn a place beside a sentence that holds the whole request.
* The best ``MAX_SENTENCES`` remaining sentences are kept (ties: earlier result, then earlier
  sentence), at most ``MAX_PER_RESULT`` from one result, and written in result order, each
  citing its result's id in brackets before its closing punctuation. The citations list those
  ids in the same order.
* Nothing scores → ``{"answer": "", "citations": []}``: no answer rather than a guess.

Text inside a result is only ever counted and quoted, never read as instructions, and only
ids the prompt gave are ever cited.
"""

from __future__ import annotations

import json
import re

from esra.core.prompts import Prompt
from esra.llm._reference import items, string
from esra.llm._request import Concept, analyse
from esra.llm._text import STOPWORDS, stem, tokens

__all__ = [
    "MAX_PER_RESULT",
    "MAX_SENTENCES",
    "MAX_SENTENCE_CHARS",
    "RELATIVE_THRESHOLD",
    "TITLE_SHARE",
    "TOP_RESULTS",
    "answer_question",
]

TOP_RESULTS = 5
MAX_SENTENCES = 3
MAX_PER_RESULT = 2
MAX_SENTENCE_CHARS = 300
TITLE_SHARE = 0.25
RELATIVE_THRESHOLD = 0.5

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ELLIPSIS = "…"


def _sentences(fragment: str) -> list[str]:
    text = fragment.strip().strip(_ELLIPSIS).strip()
    found = []
    for piece in _SENTENCE_END.split(text):
        sentence = " ".join(piece.split())
        if len(sentence) > MAX_SENTENCE_CHARS:
            cut = sentence.rfind(" ", 0, MAX_SENTENCE_CHARS - 1)
            sentence = sentence[: cut if cut > 0 else MAX_SENTENCE_CHARS - 1] + _ELLIPSIS
        if sentence:
            found.append(sentence)
    return found


def _cite(sentence: str, result_id: str) -> str:
    # The citation goes inside the sentence's closing punctuation: "… leave [r_x]."
    if sentence[-1] in ".!?":
        return f"{sentence[:-1]} [{result_id}]{sentence[-1]}"
    return f"{sentence} [{result_id}]"


def _held(concepts: tuple[Concept, ...], text: str) -> float:
    present = {stem(w) for w in tokens(text) if w not in STOPWORDS}
    return sum(
        max((weight for key, weight in concept if key in present), default=0.0)
        for concept in concepts
    )


def answer_question(prompt: Prompt) -> str:
    """Answer an answer-task prompt with the best-matching sentences of the top results."""
    concepts = analyse(prompt.request).concepts
    scored: list[tuple[float, int, int, str, str]] = []
    seen: set[str] = set()
    for position, (_, obj) in enumerate(items(prompt)):
        result_id = string(obj, "id")
        if not result_id or result_id in seen:
            continue
        seen.add(result_id)
        if len(seen) > TOP_RESULTS:
            break
        title = _held(concepts, string(obj, "title"))
        for index, sentence in enumerate(_sentences(string(obj, "fragment"))):
            held = _held(concepts, sentence)
            if held > 0.0:
                scored.append((held + TITLE_SHARE * title, position, index, result_id, sentence))
    scored.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    floor = RELATIVE_THRESHOLD * scored[0][0] if scored else 0.0
    kept: list[tuple[int, int, str, str]] = []
    per_result: dict[str, int] = {}
    for score, position, index, result_id, sentence in scored:
        if len(kept) == MAX_SENTENCES or score < floor:
            break
        if per_result.get(result_id, 0) == MAX_PER_RESULT:
            continue
        per_result[result_id] = per_result.get(result_id, 0) + 1
        kept.append((position, index, result_id, sentence))
    kept.sort()
    text = " ".join(_cite(sentence, result_id) for _, _, result_id, sentence in kept)
    citations = list(dict.fromkeys(result_id for _, _, result_id, _ in kept))
    return json.dumps({"answer": text, "citations": citations}, ensure_ascii=False)
