"""The ``Embedder`` port: sentence embeddings the LocalModel's rerank can compare by meaning.

This module is standard library only; the packaged MiniLM implementation lives in
``esra.llm._minilm`` and is imported only when a host asks for it, so ``import esra.llm``
never loads an embedding stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Embedder", "cosine"]


@runtime_checkable
class Embedder(Protocol):
    """Turn texts into unit-length vectors whose dot product measures likeness of meaning."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one L2-normalised vector per text, in order, all of the same length.

        The same text must always give the same vector: the LocalModel promises the same
        answer to the same prompt.
        """
        ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Return the cosine similarity of two unit-length vectors (their dot product)."""
    return sum(x * y for x, y in zip(a, b, strict=True))
