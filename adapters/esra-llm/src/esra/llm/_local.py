"""LocalModel: an offline, deterministic stand-in for a remote model, built from word overlap."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from itertools import islice
from typing import assert_never

from esra.core.prompts import Prompt, PromptTask, RerankItem
from esra.llm._answer import answer_question
from esra.llm._embedding_cache import DEFAULT_MAX_ENTRIES, EmbeddingCache
from esra.llm._embeddings import Embedder
from esra.llm._planning import answer_plan
from esra.llm._rerank import answer_rerank
from esra.llm._selection import answer_selection
from esra.llm._warm import rerank_texts

__all__ = ["LocalModel"]

_WARM_BATCH = 256


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

    With an ``EmbeddingCache`` as its embedder, the rerank's request (the caller's prompt) is
    looked up but never stored: only result texts are kept on disk.
    """

    def __init__(self, *, embedder: Embedder | None = None) -> None:
        self._embedder = embedder
        self._owned: EmbeddingCache | None = None

    @classmethod
    def with_embeddings(
        cls,
        *,
        cache_path: str | os.PathLike[str] | None = None,
        cache_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> LocalModel:
        """Return a LocalModel whose rerank uses the packaged all-MiniLM-L6-v2 model offline.

        Args:
            cache_path: a SQLite file to keep the vectors in (see ``EmbeddingCache``), so each
                result text is encoded once, across invocations, processes and restarts.
                Without it vectors are cached in memory only, 4,096 texts.
            cache_entries: how many vectors the file keeps (least recently used go first).

        The model owns the cache it opens here: ``close()`` closes it.

        Raises:
            ImportError: the ``embeddings`` extra (``esra-llm[embeddings]``) is not installed.
            sqlite3.Error, OSError, ValueError: ``cache_path`` cannot be opened as a cache.
        """
        # Imported here so that ``import esra.llm`` never loads the embedding stack.
        from esra.llm._minilm import MiniLMEmbedder  # noqa: PLC0415

        if cache_path is None:
            return cls(embedder=MiniLMEmbedder())
        # Behind the file, the encoder only ever sees texts the file lacks: a memory cache
        # there would hold nothing asked for again.
        cache = EmbeddingCache(MiniLMEmbedder(cache_size=0), cache_path, max_entries=cache_entries)
        model = cls(embedder=cache)
        model._owned = cache
        return model

    @property
    def embedder(self) -> Embedder | None:
        """The embedder the rerank blends in, if any."""
        return self._embedder

    def warm_embeddings(self, items: Iterable[RerankItem]) -> int:
        """Embed now what the rerank will embed for ``items``; return how many texts were new.

        Pass what the rerank prompt will show of each record (a host builds it with
        ``esra.core.prompts.record_item``); the ids are ignored. With an
        ``EmbeddingCache``, only texts it does not hold are encoded, and the count says how
        many; with another embedder every text is encoded (in batches) and counted. This is
        blocking CPU work: from async code, run it with ``asyncio.to_thread``.

        Raises:
            ValueError: this model has no embedder.
        """
        embedder = self._embedder
        if embedder is None:
            msg = "this LocalModel has no embedder to warm"
            raise ValueError(msg)
        texts = rerank_texts(items)
        if isinstance(embedder, EmbeddingCache):
            return embedder.prime(texts)
        encoded = 0
        while batch := list(islice(texts, _WARM_BATCH)):
            embedder.encode(batch)
            encoded += len(batch)
        return encoded

    def close(self) -> None:
        """Close the embedding cache ``with_embeddings`` opened, if any (else nothing)."""
        if self._owned is not None:
            self._owned.close()

    async def complete(self, prompt: Prompt) -> str:
        """Return the answer text to ``prompt``.

        With an embedder, the work runs in a worker thread: encoding takes long enough to
        stall every other invocation sharing the event loop, and a blocked loop could not
        time the call out either (the core gives the rerank until shortly before the
        invocation deadline, then falls back to the search order). A call that is timed out
        still finishes in its thread, so what it encoded is cached for the next one.
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
            return answer_rerank(prompt, self._rerank_embedder(prompt))
        if task is PromptTask.ANSWER:
            return answer_question(prompt)
        assert_never(task)

    def _rerank_embedder(self, prompt: Prompt) -> Embedder | None:
        embedder = self._embedder
        if isinstance(embedder, EmbeddingCache):
            # The request is the caller's prompt: it must not outlive the invocation on disk.
            return embedder.without_storing((prompt.request,))
        return embedder
