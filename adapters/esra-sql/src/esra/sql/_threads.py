"""Synchronous drivers on pinned threads: one connection, one worker thread, pooled LIFO.

A DB-API connection of a synchronous driver must not be used by two threads at once. Each
``ConnectionSlot`` owns at most one connection and the only thread that ever touches it, so
use is serialized by construction and the event loop never blocks. Connections open lazily,
on the slot's own thread, through the adapter's opener (where each engine sets up its
session). A ``SlotPool`` keeps at most ``size`` slots and reuses them last-in first-out, so
the most recently used (warmest) slot stays busy.

A slot whose statement was abandoned (deadline or cancellation) or whose session ended is
marked ``broken``: the pool closes it, on its own thread once that statement returns, instead
of reusing it, so the next execution never inherits a half-finished session.

``PinnedRunner`` is the execution flow shared by providers whose driver can neither run
asynchronously nor be trusted to stop on its own: take a slot within the deadline, run the
work on the slot's thread, stop waiting at the deadline (plus the engine's grace), abandon
the slot on timeout or cancellation, and classify driver failures without their text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

import attrs

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError

__all__ = [
    "SESSION_ENDING",
    "Classifier",
    "ConnectionSlot",
    "ExecutionState",
    "PinnedRunner",
    "PoolTimeoutError",
    "SlotPool",
]


class _Closeable(Protocol):
    def close(self) -> object: ...


class Classifier(Protocol):
    """An engine's ``classify``: the provider code for a driver exception."""

    def __call__(
        self, exc: BaseException, *, state: ExecutionState | None = None
    ) -> ProviderErrorCode: ...


C = TypeVar("C", bound=_Closeable)
T = TypeVar("T")

# After these a connection's session cannot be trusted again: the slot is discarded.
SESSION_ENDING = frozenset(
    {
        ProviderErrorCode.CONNECTION_REFUSED,
        ProviderErrorCode.TIMEOUT,
        ProviderErrorCode.CANCELLED,
        ProviderErrorCode.AUTH_FAILED,
    }
)


class PoolTimeoutError(Exception):
    """No connection became free before the caller's deadline, or the pool closed while the
    caller waited."""


@attrs.define
class ExecutionState:
    """Why a statement may have stopped: its deadline passed, or it was cancelled."""

    timed_out: bool = False
    cancelled: bool = False


class ConnectionSlot(Generic[C]):
    """A lazily opened connection pinned to its own single worker thread."""

    def __init__(self, opener: Callable[[], C], thread_name: str) -> None:
        self._opener = opener
        self._connection: C | None = None
        self.broken = False
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)

    @property
    def opened(self) -> C | None:
        """The connection if it is open, without opening one (safe to read from any thread)."""
        return self._connection

    def connection(self) -> C:
        """Return the slot's connection, opening it on first use (call on the slot's thread).

        Raises:
            Exception: whatever the opener raises (the driver's connect error); nothing is kept.
        """
        if self._connection is None:
            self._connection = self._opener()
        return self._connection

    def discard(self) -> None:
        """Close and forget the connection (call on the slot's thread); the next use reopens."""
        connection, self._connection = self._connection, None
        if connection is not None:
            # It is finished with either way: a failure to close says nothing new.
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        """Close the connection on its own thread once queued work ends, then stop the thread."""
        self.executor.submit(self.discard)
        self.executor.shutdown(wait=False)


class SlotPool(Generic[C]):
    """At most ``size`` connection slots, created on demand and reused last-in first-out.

    Thread-safe; nothing connects here: a slot opens its connection with ``opener`` on its
    own thread at first use.

    Args:
        opener: opens one connection of the engine, with its session set up.
        size: the most slots (and so connections) the pool keeps.
        thread_name: prefix of the slots' worker-thread names.
    """

    def __init__(
        self, opener: Callable[[], C], *, size: int = 4, thread_name: str = "esra-sql"
    ) -> None:
        if size < 1:
            msg = "the pool needs at least one connection"
            raise ValueError(msg)
        self._opener = opener
        self._size = size
        self._thread_name = thread_name
        # ``None`` is the closed pool's wake-up: each waiter that takes it puts it back.
        self._idle: queue.LifoQueue[ConnectionSlot[C] | None] = queue.LifoQueue()
        self._created = 0
        self._lock = threading.Lock()
        self._closed = False

    def try_acquire(self) -> ConnectionSlot[C] | None:
        """Return an idle slot, or a new one while the pool has room; never wait. A closed
        pool has neither."""
        try:
            idle = self._idle.get_nowait()
        except queue.Empty:
            pass
        else:
            if idle is not None:
                return idle
            self._idle.put(None)  # the wake-up stays for every other waiter
            return None
        with self._lock:
            if self._closed or self._created >= self._size:
                return None
            self._created += 1
        return ConnectionSlot(self._opener, self._thread_name)

    def acquire(self, timeout_s: float) -> ConnectionSlot[C]:
        """Return a slot, blocking up to ``timeout_s`` seconds for one to be released.

        Raises:
            PoolTimeoutError: when every slot stayed busy for ``timeout_s``, or the pool was
                closed meanwhile (no slot will come back to it).
        """
        slot = self.try_acquire()
        if slot is not None:
            return slot
        try:
            released = self._idle.get(timeout=max(timeout_s, 0.0))
        except queue.Empty as exc:
            raise PoolTimeoutError from exc
        if released is None:
            self._idle.put(None)  # wake the next waiter too
            msg = "the pool was closed"
            raise PoolTimeoutError(msg)
        return released

    async def acquire_async(self, timeout_s: float) -> ConnectionSlot[C]:
        """Return a slot, waiting off the event loop up to ``timeout_s`` seconds.

        Raises:
            PoolTimeoutError: when every slot stayed busy for ``timeout_s``, or the pool was
                closed meanwhile.
        """
        slot = self.try_acquire()
        if slot is not None:
            return slot
        waiting = asyncio.get_running_loop().run_in_executor(None, self.acquire, timeout_s)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            # The waiting thread may still get a slot after we gave up: hand it straight back.
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
        """Close idle slots now; busy ones close when released. Callers waiting for a slot
        give up at once rather than at their deadline (a thread parked until then would
        also hold up the event loop's shutdown)."""
        with self._lock:
            self._closed = True
        while True:
            try:
                slot = self._idle.get_nowait()
            except queue.Empty:
                break
            if slot is not None:
                slot.close()
        self._idle.put(None)


class PinnedRunner(Generic[C]):
    """Runs work on a pooled slot's thread within a deadline, classifying driver failures.

    Args:
        pool: the slots to run on.
        engine: the engine's name, as log messages give it (``"oracle"``).
        log: the adapter's logger.
        driver_errors: the driver's exception types, classified into provider codes.
        classify: maps a driver exception (and why it may have stopped) to its code.
        grace_s: how long past the deadline to wait for the driver's own timeout to fire.
        interrupt: breaks a running statement from the event-loop thread (at the deadline
            or on cancellation), where the driver offers a thread-safe way; driver errors
            it raises are its own to suppress.
    """

    def __init__(
        self,
        pool: SlotPool[C],
        *,
        engine: str,
        log: logging.Logger,
        driver_errors: tuple[type[BaseException], ...],
        classify: Classifier,
        grace_s: float,
        interrupt: Callable[[C], None] | None = None,
    ) -> None:
        self._pool = pool
        self._engine = engine
        self._log = log
        self._driver_errors = driver_errors
        self._classify = classify
        self._grace_s = grace_s
        self._interrupt = interrupt

    async def run(self, work: Callable[[C], T], timeout_s: float, label: str) -> T:
        """Run ``work(connection)`` on a slot's thread and return its result.

        Raises:
            ProviderError: ``TIMEOUT`` when no slot frees up or the deadline passes, or the
                classified code of a driver failure (driver text goes to the log only).
            asyncio.CancelledError: if the awaiting task is cancelled (the slot is abandoned).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        try:
            slot = await self._pool.acquire_async(timeout_s)
        except PoolTimeoutError as exc:
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc
        state = ExecutionState()
        remaining = max(deadline - loop.time(), 0.001)
        running = loop.run_in_executor(slot.executor, self._body, slot, work, state, label)
        try:
            # The driver's own timeout fires first; this outer deadline only catches what it
            # cannot bound (a connect or network read that hangs past it).
            return await asyncio.wait_for(asyncio.shield(running), remaining + self._grace_s)
        except TimeoutError as exc:
            state.timed_out = True
            self._abandon(slot, running)
            raise ProviderError(ProviderErrorCode.TIMEOUT) from exc
        except asyncio.CancelledError:
            state.cancelled = True
            self._abandon(slot, running)
            raise
        finally:
            self._pool.release(slot)

    def _abandon(self, slot: ConnectionSlot[C], running: asyncio.Future[Any]) -> None:
        """Discard the slot behind the running statement, breaking it off where possible."""
        slot.broken = True
        running.add_done_callback(_consume)
        connection = slot.opened
        if self._interrupt is not None and connection is not None:
            self._interrupt(connection)

    def _body(
        self,
        slot: ConnectionSlot[C],
        work: Callable[[C], T],
        state: ExecutionState,
        label: str,
    ) -> T:
        """Slot-thread body: connect if needed, run ``work``, classify driver failures."""
        if state.cancelled:
            raise ProviderError(ProviderErrorCode.CANCELLED)
        try:
            return work(slot.connection())
        except self._driver_errors as exc:
            code = self._classify(exc, state=state)
            if code in SESSION_ENDING:
                slot.broken = True
            # Driver text may name objects or echo values: log only, never in the error.
            self._log.warning("%s query %s failed as %s: %r", self._engine, label, code.value, exc)
            raise ProviderError(code) from exc


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned statement's outcome so it is never reported as unhandled."""
    if not future.cancelled():
        future.exception()
