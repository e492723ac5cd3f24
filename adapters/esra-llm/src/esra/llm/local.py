"""LocalModel: an offline, deterministic stand-in for a remote model, built from word overlap."""

from __future__ import annotations

import asyncio
from typing import assert_never

from esra.core.prompts import Prompt, PromptTask
from esra.llm._answer import answer_question
from esra.llm._planning import answer_plan
from esra.llm._rerank import answer_rerank
from esra.llm._selection import answer_selection
from esra.llm.embeddings import Embedder

__all__ = ["LocalModel"]


class LocalModel:
    """Answer ESRA's four prompts offline, deterministically, from lexical evidence alone.

    It implements the ``LanguageModel`` port and takes the same path as a remote model: it
    reads only the prompt's task, request and reference items (JSON data it parses, never
    follows) and returns JSON text meeting the task's output contract, which the core parses
    and validates like any other answer. The same prompt always gets the same answer text.

    On its own it has no understanding of meaning beyond a light stemmer and a small built-in
    vocabulary of synonyms and acronyms; it is the default for offline use, demos and tests,
    not a substitute for a real model's judgement. Given an ``embedder`` (see
    ``with_embeddings``), its rerank blends sentence-embedding similarity with the lexical
    score; the other tasks stay lexical.
    """

    def __init__(self, *, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    @classmethod
    def with_embeddings(cls) -> LocalModel:
        """Return a LocalModel whose rerank uses the packaged all-MiniLM-L6-v2 model offline.

        Raises:
            ImportError: the ``embeddings`` extra (``esra-llm[embeddings]``) is not installed.
        """
        # Imported here so that ``import esra.llm`` never loads the embedding stack.
        from esra.llm.minilm import MiniLMEmbedder  # noqa: PLC0415

        return cls(embedder=MiniLMEmbedder())

    @property
    def embedder(self) -> Embedder | None:
        """The embedder the rerank blends in, if any."""
        return self._embedder

    async def complete(self, prompt: Prompt) -> str:
        """Return the answer text to ``prompt``.

        With an embedder, the work runs in a worker thread: encoding takes long enough to
        stall every other invocation sharing the event loop.
        """
        if self._embedder is not None:
            return await asyncio.to_thread(self.answer, prompt)
        return self.answer(prompt)

    def answer(self, prompt: Prompt) -> str:
        """Return the answer text to ``prompt`` synchronously (no I/O beyond the embedder)."""
        task = prompt.task
        if task is PromptTask.SELECT_SOURCES:
            return answer_selection(prompt)
        if task is PromptTask.PLAN_SEARCHES:
            return answer_plan(prompt)
        if task is PromptTask.RERANK:
            return answer_rerank(prompt, self._embedder)
        if task is PromptTask.ANSWER:
            return answer_question(prompt)
        assert_never(task)
