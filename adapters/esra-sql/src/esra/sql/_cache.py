"""A bounded, thread-safe LRU of compiled statement text, keyed by dialect and query shape.

Compiling a SQLAlchemy statement costs far more than running a small indexed query, and the
text depends only on the query's shape (never on its values), so each shape is compiled once
and every later execution only builds a parameter dictionary.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

import attrs

__all__ = ["CacheInfo", "CompiledStatement", "CompiledStatementCache"]


@attrs.frozen
class CompiledStatement:
    """Compiled command text plus the constant binds the dialect itself introduced.

    Attributes:
        sql: the command text in the dialect's named paramstyle.
        constants: values of binds the dialect compiler added on its own (SQLite renders
            ``OFFSET :param_1`` with 0, for example); merged into every execution's params.
    """

    sql: str
    constants: Mapping[str, object] = attrs.field(factory=dict)


@attrs.frozen
class CacheInfo:
    """Counters for observing the cache (and for tests proving a hit)."""

    hits: int
    misses: int
    size: int
    maxsize: int


class CompiledStatementCache:
    """Least-recently-used map from ``(dialect key, query shape)`` to ``CompiledStatement``.

    ``maxsize=0`` disables caching: every lookup compiles. Safe to share between threads
    (providers build statements in worker threads); two threads racing on one missing key
    may both compile, which is harmless because compilation is deterministic.
    """

    def __init__(self, maxsize: int = 256) -> None:
        if maxsize < 0:
            msg = "maxsize must be zero or positive"
            raise ValueError(msg)
        self._maxsize = maxsize
        self._entries: OrderedDict[Hashable, CompiledStatement] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get_or_compile(
        self, key: Hashable, compile_: Callable[[], CompiledStatement]
    ) -> CompiledStatement:
        """Return the entry for ``key``, compiling (outside the lock) and storing it if absent."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return entry
            self._misses += 1
        entry = compile_()
        if self._maxsize:
            with self._lock:
                self._entries[key] = entry
                self._entries.move_to_end(key)
                while len(self._entries) > self._maxsize:
                    self._entries.popitem(last=False)
        return entry

    def info(self) -> CacheInfo:
        """Return hit and miss counters and the current size."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._entries), self._maxsize)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._hits = 0
            self._misses = 0
