"""A small pool of PyMySQL connections, each pinned to its own worker thread.

PyMySQL is synchronous and a connection must not be used by two threads at once. As in
``esra.sqlite``, each slot owns one connection and one single-thread executor that runs every
statement of that connection, so use is serialized by construction and the event loop never
blocks. Connections open lazily, on the slot's thread, at first use; one that reports a lost
connection is dropped and reopened by the next statement.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["ConnectionPool", "ConnectionSlot", "PoolTimeoutError"]

Connect = Callable[[], Any]


class PoolTimeoutError(Exception):
    """No connection became free before the caller's deadline."""


class ConnectionSlot:
    """One PyMySQL connection and the one worker thread that runs all of its statements."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._connection: Any = None
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="esra-mysql")

    def connection(self) -> Any:
        """Return the slot's connection, opening it on first use (call on the slot's thread).

        Raises:
            pymysql.err.MySQLError: if the server cannot be reached or refuses the login.
        """
        if self._connection is None:
            self._connection = self._connect()
        return self._connection

    def discard(self) -> None:
        """Close and forget the connection (call on the slot's thread); the next use reopens."""
        connection, self._connection = self._connection, None
        if connection is not None:
            # It is already unusable: a failure to close says nothing new.
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Close the connection on its own thread once queued work ends, then stop the thread."""
        self.executor.submit(self.discard)
        self.executor.shutdown(wait=False)


class ConnectionPool:
    """At most ``size`` connection slots, created lazily and reused last-in first-out.

    Thread-safe; nothing connects here.
    """

    def __init__(self, connect: Connect, *, size: int = 4) -> None:
        if size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        self._connect = connect
        self._size = size
        self._idle: queue.LifoQueue[ConnectionSlot] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._closed = False

    def try_acquire(self) -> ConnectionSlot | None:
        """Return an idle slot or a new one if the pool has room; never wait."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._created >= self._size:
                return None
            self._created += 1
        return ConnectionSlot(self._connect)

    def acquire(self, timeout_s: float) -> ConnectionSlot:
        """Return a slot, waiting up to ``timeout_s`` seconds for one to be released.

        Raises:
            PoolTimeoutError: when every slot stayed busy for ``timeout_s``.
        """
        slot = self.try_acquire()
        if slot is not None:
            return slot
        try:
            return self._idle.get(timeout=max(timeout_s, 0.0))
        except queue.Empty as exc:
            raise PoolTimeoutError from exc

    def release(self, slot: ConnectionSlot) -> None:
        """Return ``slot`` to the pool (or close it if the pool was closed)."""
        with self._lock:
            closed = self._closed
        if closed:
            slot.close()
        else:
            self._idle.put(slot)

    def close(self) -> None:
        """Close idle slots now; busy ones close when released."""
        with self._lock:
            self._closed = True
        while True:
            try:
                slot = self._idle.get_nowait()
            except queue.Empty:
                return
            slot.close()
