"""Test doubles of the ``Embedder`` port shared by the embedding-cache tests."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

__all__ = ["CountingEmbedder", "vector"]


class CountingEmbedder:
    """A deterministic fake that records every batch it is asked to encode."""

    identity = "counting-fake/1"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    @property
    def encoded(self) -> list[str]:
        """Every text encoded, over all calls."""
        return [text for call in self.calls for text in call]

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(list(texts))
        return [vector(text) for text in texts]


def vector(text: str) -> list[float]:
    """Three float32-exact components derived from the text (not normalised: not needed)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[0] / 256, digest[1] / 256, 1.0]
