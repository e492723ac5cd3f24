"""Connection slots for a synchronous driver: one connection, one worker thread each.

Each slot owns at most one driver connection and the only thread that ever touches it, so a
connection is used by one thread at a time by construction (the driver is not thread-safe
per connection). Slots are reused last-in first-out; a slot whose statement was abandoned
(deadline or cancellation) is marked ``broken`` and closed on its own thread once that
statement returns, so the next execution never inherits a half-finished session.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

__all__ = ["ConnectionSlot", "PoolTimeoutError", "SlotPool"]

C = TypeVar("C")


class PoolTimeoutError(Exception):
    """No slot became free before the caller's deadline."""


class ConnectionSlot(Generic[C]):
    """A lazily opened connection pinned to its own single worker thread."""

    def __init__(self, closer: Callable[[C], None], thread_name: str) -> None:
        self.connection: C | None = None
        self.broken = False
        self._closer = closer
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)

    def close(self) -> None:
        """Close the connection on the slot's thread after queued work, then stop the thread."""

        def close_connection() -> None:
            connection, self.connection = self.connection, None
            if connection is not None:
                # A failing close leaves nothing to recover.
                with contextlib.suppress(Exception):
                    self._closer(connection)

        self.executor.submit(close_connection)
        self.executor.shutdown(wait=False)


class SlotPool(Generic[C]):
    """At most ``size`` slots, created on demand, reused LIFO; thread-safe."""

    def __init__(self, *, size: int, closer: Callable[[C], None], thread_name: str) -> None:
        if size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        self._size = size
        self._closer = closer
        self._thread_name = thread_name
        self._idle: queue.LifoQueue[ConnectionSlot[C]] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._closed = False

    def try_acquire(self) -> ConnectionSlot[C] | None:
        """Return an idle slot, or a new one while under ``size``; never wait."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._created >= self._size:
                return None
            self._created += 1
        return ConnectionSlot(self._closer, self._thread_name)

    def _wait(self, timeout_s: float) -> ConnectionSlot[C]:
        slot = self.try_acquire()
        if slot is not None:
            return slot
        try:
            return self._idle.get(timeout=max(timeout_s, 0.0))
        except queue.Empty as exc:
            raise PoolTimeoutError from exc

    async def acquire(self, timeout_s: float) -> ConnectionSlot[C]:
        """Return a slot, waiting off the event loop up to ``timeout_s`` seconds.

        Raises:
            PoolTimeoutError: every slot stayed busy.
        """
        slot = self.try_acquire()
        if slot is not None:
            return slot
        waiting = asyncio.get_running_loop().run_in_executor(None, self._wait, timeout_s)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            waiting.add_done_callback(self._release_abandoned)
            raise

    def _release_abandoned(self, waiting: asyncio.Future[ConnectionSlot[C]]) -> None:
        if not waiting.cancelled() and waiting.exception() is None:
            self.release(waiting.result())

    def release(self, slot: ConnectionSlot[C]) -> None:
        """Return ``slot``; a broken slot (or any slot after ``close``) is closed instead."""
        with self._lock:
            closed = self._closed
            if slot.broken and not closed:
                self._created -= 1
        if closed or slot.broken:
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
