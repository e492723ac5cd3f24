"""FakeLanguageModel: a scriptable, instant model that records every prompt it is sent."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Collection

from esra.core._prompts.model import Prompt, PromptTask

__all__ = ["FakeLanguageModel", "Responder"]

Responder = Callable[[Prompt], str]

_WORD = re.compile(r"\w+")


def _select_all(prompt: Prompt) -> str:
    # Each item's tag is the source id (see build_selection_prompt).
    ids = [item.tag for item in prompt.reference]
    return json.dumps({"sources": ids})


def _plan_keywords(prompt: Prompt) -> str:
    words = [w for w in _WORD.findall(prompt.request.lower()) if len(w) > 2][:8]
    queries = [
        {
            "mapping": json.loads(item.content)["mapping"],
            "strategy": "keyword",
            "optional_terms": words,
        }
        for item in prompt.reference
        if item.tag != "source"
    ]
    return json.dumps({"queries": queries})


def _answer_from_first(prompt: Prompt) -> str:
    # Each item's tag is the result id (see build_answer_prompt): cite the first three by title.
    cited = [(item.tag, str(json.loads(item.content)["title"])) for item in prompt.reference[:3]]
    text = " ".join(f"{title} [{result_id}]." for result_id, title in cited)
    return json.dumps({"answer": text, "citations": [result_id for result_id, _ in cited]})


def _rerank_in_order(prompt: Prompt) -> str:
    count = len(prompt.reference)
    # Each item's tag is the result id (see build_rerank_prompt).
    scores = [
        {"id": item.tag, "score": round(1.0 - i / max(count, 1), 6)}
        for i, item in enumerate(prompt.reference)
    ]
    return json.dumps({"scores": scores})


_DEFAULTS: dict[PromptTask, Responder] = {
    PromptTask.SELECT_SOURCES: _select_all,
    PromptTask.PLAN_SEARCHES: _plan_keywords,
    PromptTask.RERANK: _rerank_in_order,
    PromptTask.ANSWER: _answer_from_first,
}


class FakeLanguageModel:
    """Answers each task with a responder; by default selects every candidate, plans one
    keyword query per mapping from the request's words, scores rerank items in the order
    given, and answers with the titles of the first three answer items, citing their ids.
    Pass ``{PromptTask.ANSWER: responder}`` to script answers (each reference item's tag is
    the result id it may cite). A responder may raise to simulate a failing model.

    A task in ``stalled`` never answers: its call waits until it is cancelled, like a model
    too slow for any deadline (its prompt is still recorded).

    ``prompts`` keeps every prompt received, so tests can inspect exactly what a model saw.
    """

    def __init__(
        self,
        responders: dict[PromptTask, Responder] | None = None,
        *,
        stalled: Collection[PromptTask] = (),
    ) -> None:
        self._responders = {**_DEFAULTS, **(responders or {})}
        self._stalled = frozenset(stalled)
        self.prompts: list[Prompt] = []

    async def complete(self, prompt: Prompt) -> str:
        """Record ``prompt`` and return its responder's answer (a stalled task never returns)."""
        self.prompts.append(prompt)
        if prompt.task in self._stalled:
            await asyncio.Event().wait()
        return self._responders[prompt.task](prompt)

    def prompts_for(self, task: PromptTask) -> list[Prompt]:
        """Return the prompts received for one task."""
        return [p for p in self.prompts if p.task is task]
