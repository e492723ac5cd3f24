"""``EmbeddingCache``: sentence-embedding vectors kept on disk, computed once per text.

A rerank with embeddings encodes every candidate's text; on a corpus it has not seen, that is
every candidate of every question, and on a CPU it can take longer than the invocation may.
The cache wraps any ``Embedder``: each vector is stored in a SQLite file under the SHA-256 of
the model's identity and the text, so a text is encoded once, across invocations, threads,
processes and restarts; only texts it does not hold go to the encoder, in one batch.
``prime`` fills it ahead of time (see ``LocalModel.warm_embeddings``).

What the file holds, and what it never holds:

* per text, a 32-byte key (SHA-256 of the length-prefixed model identity, then the text as
  UTF-8), the vector as little-endian float32, and a use counter — never the text, so the
  cache is not a copy of the governed records it was computed from. A vector is still
  derived from a record (embeddings can be partly inverted), and a key confirms a guessed
  text: the file is created owner-only (0600) and belongs with the data it came from;
* never a caller's prompt: the LocalModel embeds the request without storing it
  (``without_storing``), since a prompt must not outlive its invocation.

The bound is a number of vectors (``max_entries``, 100,000 by default: about 210 MB at 384
dimensions). Each write transaction advances a counter kept in the file, and every vector a
call uses or adds is stamped with it; past the bound, the vectors with the oldest stamps
go first, so the eviction is least recently used across every process sharing the file.

The file is opened in WAL mode (readers never wait for the writer); writes take SQLite's
write lock briefly and wait up to ``_BUSY_TIMEOUT_S`` for it. In one process, threads share
one connection under a lock, and the encoder is called by one thread at a time, which looks
the texts up again first, so two threads never encode the same text twice. A failing
database never fails an encoding: the texts are encoded as if the cache were empty, and the
error is logged (its type and the file only).
"""

from __future__ import annotations

import array
import hashlib
import logging
import os
import sqlite3
import sys
import threading
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from esra.llm._embeddings import Embedder

__all__ = ["DEFAULT_MAX_ENTRIES", "EmbeddingCache"]

DEFAULT_MAX_ENTRIES = 100_000
_SCHEMA_VERSION = 1
# Keys per statement: SQLite builds before 3.32 allow at most 999 host parameters.
_CHUNK = 500
# ``prime`` sends the encoder at most this many texts at once, so a corpus never becomes one
# list of vectors in memory.
_PRIME_BATCH = 256
_BUSY_TIMEOUT_S = 10.0

_log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors ("
    " key BLOB PRIMARY KEY,"  # sha256(model identity, text): never the text itself
    " vector BLOB NOT NULL,"  # float32, little-endian
    " used INTEGER NOT NULL)",  # the write counter when last used (least recently used first)
    "CREATE INDEX IF NOT EXISTS vectors_by_use ON vectors (used)",
    "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 0), tick INTEGER)",
    "INSERT OR IGNORE INTO counter (id, tick) VALUES (0, 0)",
    f"PRAGMA user_version = {_SCHEMA_VERSION}",
)


def _pack(vector: Sequence[float]) -> bytes:
    packed = array.array("f", vector)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def _unpack(blob: bytes) -> list[float]:
    packed = array.array("f")
    packed.frombytes(blob)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


def _open(path: Path) -> sqlite3.Connection:
    # Created owner-only before SQLite opens it (its WAL files take the same mode): the
    # vectors are derived from governed records.
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    db = sqlite3.connect(
        path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        db.execute("PRAGMA journal_mode = WAL")
        # In WAL mode, NORMAL loses at most the last transactions on power loss, never the
        # file; a lost vector is only computed again.
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("BEGIN IMMEDIATE")
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version not in (0, _SCHEMA_VERSION):
            msg = f"{path} is not an ESRA embedding cache (schema version {version})"
            raise ValueError(msg)
        for statement in _SCHEMA:
            db.execute(statement)
        db.execute("COMMIT")
    except BaseException:
        db.close()
        raise
    return db


class EmbeddingCache:
    """An ``Embedder`` that keeps every vector its ``inner`` embedder computes in a SQLite file.

    Args:
        inner: the embedder that computes what the cache does not hold. It must give the same
            vector for the same text (the ``Embedder`` contract).
        path: the SQLite file (created if missing, owner-only; its folder must exist).
        model_id: names the model and its configuration: vectors are keyed by it, so a
            different model never reads another's vectors from a shared file. Defaults to
            ``inner.identity`` (``MiniLMEmbedder`` has one).
        max_entries: how many vectors the file keeps; the least recently used go first.

    Vectors are stored as float32 and returned as stored, also the first time, so a text
    gives the same vector whether it was computed now or read back.

    Raises:
        TypeError: no ``model_id`` and ``inner`` has no ``identity``.
        ValueError: ``max_entries`` is below 1, or the file is another program's database.
        sqlite3.Error: the file cannot be opened as a SQLite database.
        OSError: the file cannot be created.
    """

    def __init__(
        self,
        inner: Embedder,
        path: str | os.PathLike[str],
        *,
        model_id: str | None = None,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        if max_entries < 1:
            msg = "max_entries must be at least 1"
            raise ValueError(msg)
        identity = model_id if model_id is not None else getattr(inner, "identity", None)
        if not isinstance(identity, str) or not identity:
            msg = "name the model the vectors come from: pass model_id=..."
            raise TypeError(msg)
        self._inner = inner
        self._identity = identity
        model = identity.encode("utf-8")
        # Length-prefixed, so no (model, text) pair can be read as another.
        self._prefix = len(model).to_bytes(4, "big") + model
        self._max_entries = max_entries
        self._path = Path(path)
        self._db: sqlite3.Connection | None = _open(self._path)
        self._db_lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    @property
    def identity(self) -> str:
        """The model identity the vectors are keyed by."""
        return self._identity

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    @property
    def max_entries(self) -> int:
        """How many vectors the file keeps at most."""
        return self._max_entries

    @property
    def hits(self) -> int:
        """Distinct texts per call (of this instance) found in the file."""
        return self._hits

    @property
    def misses(self) -> int:
        """Distinct texts per call (of this instance) sent to the inner embedder."""
        return self._misses

    def __len__(self) -> int:
        """How many vectors the file holds now (every process's)."""
        with self._db_lock:
            (count,) = self._connection().execute("SELECT count(*) FROM vectors").fetchone()
        return int(count)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Return one vector per text, in order; only texts not in the file are encoded."""
        return self._encode(texts, frozenset())

    def without_storing(self, texts: Collection[str]) -> Embedder:
        """Return an embedder like this one that looks ``texts`` up but never stores them.

        For text that must not outlive the call, such as a caller's request: it is encoded
        when the file does not hold it, and forgotten afterwards.
        """
        return _Unstored(self, frozenset(texts))

    def prime(self, texts: Iterable[str]) -> int:
        """Encode and store every text the file does not hold yet; return how many were new.

        Texts go to the inner embedder in batches of ``_PRIME_BATCH``. With more distinct
        texts than ``max_entries``, the first are evicted again: size the cache to the corpus.
        """
        new = 0
        batch: list[str] = []
        for text in texts:
            batch.append(text)
            if len(batch) == _PRIME_BATCH:
                new += self._resolve(batch, frozenset())[1]
                batch = []
        if batch:
            new += self._resolve(batch, frozenset())[1]
        return new

    def close(self) -> None:
        """Close the file; using the cache afterwards raises ``RuntimeError``."""
        with self._db_lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddingCache({self._identity!r}, {str(self._path)!r})"

    def _encode(self, texts: Sequence[str], unstored: frozenset[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors, _ = self._resolve(texts, unstored)
        return [vectors[self._key(text)] for text in texts]

    def _key(self, text: str) -> bytes:
        # surrogatepass: a lone surrogate in a record still gets a key instead of an error.
        return hashlib.sha256(self._prefix + text.encode("utf-8", "surrogatepass")).digest()

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            msg = "the embedding cache is closed"
            raise RuntimeError(msg)
        return self._db

    def _resolve(
        self, texts: Sequence[str], unstored: frozenset[str]
    ) -> tuple[dict[bytes, list[float]], int]:
        """Return the vector of every distinct text, by key, and how many were computed."""
        keys = {text: self._key(text) for text in texts}
        found = self._lookup(list(keys.values()))
        missing = [text for text, key in keys.items() if key not in found]
        if not missing:
            self._count(len(keys), 0)
            self._write(list(found), [])
            return found, 0
        with self._encode_lock:
            # Another thread may have stored some of them while this one waited.
            found.update(self._lookup([keys[text] for text in missing]))
            missing = [text for text in missing if keys[text] not in found]
            computed = self._inner.encode(missing) if missing else []
            if len(computed) != len(missing):
                msg = f"the embedder returned {len(computed)} vectors for {len(missing)} texts"
                raise ValueError(msg)
            held = list(found)
            fresh: list[tuple[bytes, bytes]] = []
            for text, vector in zip(missing, computed, strict=True):
                blob = _pack(vector)
                found[keys[text]] = _unpack(blob)
                if text not in unstored:
                    fresh.append((keys[text], blob))
            self._write(held, fresh)
        self._count(len(keys) - len(missing), len(missing))
        return found, len(missing)

    def _count(self, hits: int, misses: int) -> None:
        with self._db_lock:
            self._hits += hits
            self._misses += misses

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, list[float]]:
        found: dict[bytes, list[float]] = {}
        if not keys:
            return found
        with self._db_lock:
            db = self._connection()
            try:
                for start in range(0, len(keys), _CHUNK):
                    chunk = keys[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = db.execute(
                        # Only placeholders are interpolated; the keys are parameters.
                        f"SELECT key, vector FROM vectors WHERE key IN ({marks})",  # noqa: S608
                        chunk,
                    )
                    found.update((bytes(key), _unpack(blob)) for key, blob in rows)
            except sqlite3.Error as exc:
                _log.warning(
                    "embedding cache %s unreadable (%s); encoding as if empty",
                    self._path,
                    type(exc).__name__,
                )
                return {}
        return found

    def _write(self, used: Sequence[bytes], fresh: Sequence[tuple[bytes, bytes]]) -> None:
        """Stamp ``used`` and store ``fresh`` in one transaction, then evict past the bound."""
        if not used and not fresh:
            return
        with self._db_lock:
            db = self._connection()
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.execute("UPDATE counter SET tick = tick + 1 WHERE id = 0")
                    (tick,) = db.execute("SELECT tick FROM counter WHERE id = 0").fetchone()
                    db.executemany(
                        "UPDATE vectors SET used = ? WHERE key = ?", ((tick, k) for k in used)
                    )
                    db.executemany(
                        "INSERT OR REPLACE INTO vectors (key, vector, used) VALUES (?, ?, ?)",
                        ((key, blob, tick) for key, blob in fresh),
                    )
                    if fresh:
                        self._evict(db)
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                _log.warning("embedding cache %s not updated (%s)", self._path, type(exc).__name__)

    def _evict(self, db: sqlite3.Connection) -> None:
        (count,) = db.execute("SELECT count(*) FROM vectors").fetchone()
        excess = int(count) - self._max_entries
        if excess > 0:
            db.execute(
                "DELETE FROM vectors WHERE rowid IN "
                "(SELECT rowid FROM vectors ORDER BY used, rowid LIMIT ?)",
                (excess,),
            )


class _Unstored:
    """An ``EmbeddingCache`` view that never stores some texts (see ``without_storing``)."""

    def __init__(self, cache: EmbeddingCache, unstored: frozenset[str]) -> None:
        self._cache = cache
        self._unstored = unstored

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        return self._cache._encode(texts, self._unstored)
