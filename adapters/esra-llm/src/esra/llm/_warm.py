"""The texts the LocalModel's rerank embeds for given results, to embed them ahead of time.

They are found by running the rerank itself over the results with an embedder that only
records what it is asked, so a warm-up embeds exactly what a later rerank of the same items
looks up, however the rerank composes its texts (whole texts, windows of long ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from esra.core.prompts import RerankItem, build_rerank_prompt
from esra.llm._rerank import answer_rerank

__all__ = ["rerank_texts"]

# Any request with words: the rerank embeds nothing without one. Its own text is dropped.
_REQUEST = "warm up"
_CHUNK = 64


class _Recorder:
    """An embedder that remembers the texts and answers one constant dimension."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return [[1.0] for _ in texts]


def _chunks(items: Iterable[RerankItem]) -> Iterator[list[RerankItem]]:
    chunk: list[RerankItem] = []
    for item in items:
        # The rerank reads results by id: fresh ones, so that no two items share one.
        chunk.append(RerankItem(f"r_{len(chunk)}", item.source_name, item.title, item.fragments))
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def rerank_texts(items: Iterable[RerankItem]) -> Iterator[str]:
    """Yield every distinct text the rerank embeds for ``items`` (never the request's)."""
    seen: set[str] = set()
    for chunk in _chunks(items):
        prompt = build_rerank_prompt(_REQUEST, chunk, model_profile="warm-up")
        recorder = _Recorder()
        answer_rerank(prompt, recorder)
        for text in recorder.texts:
            if text != prompt.request and text not in seen:
                seen.add(text)
                yield text
