"""LocalModel: an offline, deterministic stand-in for a remote model, built from word overlap."""

from __future__ import annotations

from typing import assert_never

from esra.core.prompts import Prompt, PromptTask
from esra.llm._answer import answer_question
from esra.llm._planning import answer_plan
from esra.llm._rerank import answer_rerank
from esra.llm._selection import answer_selection

__all__ = ["LocalModel"]


class LocalModel:
    """Answer ESRA's four prompts offline, deterministically, from lexical evidence alone.

    It implements the ``LanguageModel`` port and takes the same path as a remote model: it
    reads only the prompt's task, request and reference items (JSON data it parses, never
    follows) and returns JSON text meeting the task's output contract, which the core parses
    and validates like any other answer. The same prompt always gets the same answer text.

    It has no understanding of meaning beyond a light stemmer and a small built-in vocabulary
    of synonyms and acronyms; it is the default for offline use, demos and tests, not a
    substitute for a real model's judgement.
    """

    async def complete(self, prompt: Prompt) -> str:
        """Return the answer text to ``prompt``."""
        return self.answer(prompt)

    def answer(self, prompt: Prompt) -> str:
        """Return the answer text to ``prompt`` synchronously (pure: no I/O, no state)."""
        task = prompt.task
        if task is PromptTask.SELECT_SOURCES:
            return answer_selection(prompt)
        if task is PromptTask.PLAN_SEARCHES:
            return answer_plan(prompt)
        if task is PromptTask.RERANK:
            return answer_rerank(prompt)
        if task is PromptTask.ANSWER:
            return answer_question(prompt)
        assert_never(task)
