"""BatchingAuditSink: the ``AuditSink`` port over a durable backend, in batches, never lossy.

The guarantee, precisely:

- ``record()`` returns once the record is **accepted**: it holds a place in a bounded
  in-process queue (``queue_size`` records, counting the batch being written). When the
  queue is full, ``record()`` waits for room — the invocation waits; nothing is dropped.
  With ``wait_for_write=True`` it returns only once the record's batch is committed —
  except inside ``deferred_audit_waits()``, which a host opens around one invocation: there
  ``record()`` returns once the record is accepted, and leaving the block waits once until
  every record accepted in it is committed (or raises ``AuditUnavailableError``). The
  invocation is answered after that, so its records are still durable before its answer,
  but they cost one wait (and, with concurrent invocations, a share of one commit) instead
  of one commit each, one after another.
- A background writer hands accepted records to ``backend.write_batch`` in arrival order,
  at most ``max_batch`` at a time, no later than ``flush_interval_s`` after the first of a
  batch was accepted — at once when a batch is full, ``flush()`` is called or someone waits
  for a record not yet written. Everything queued then goes in that batch: the records of
  every invocation waiting at the moment share one commit.
- A failed write is retried, the same batch in the same order, with exponential backoff and
  jitter (stamina), for as long as it takes. Records stay queued meanwhile, so a backend that
  is down fills the queue and then holds invocations back.
- If writes have failed for ``unavailable_after_s`` the sink is **unavailable**: the writer
  keeps retrying, but ``record()`` refuses at once with ``AuditUnavailableError`` instead of
  letting invocations wait without end, so nothing proceeds unaudited. The refused record
  goes to the ``esra.audit.unwritten`` logger at ERROR — never silently anywhere. The first
  successful write makes the sink available again. A write that has not returned after
  ``unavailable_after_s`` makes the sink unavailable too, while it goes on: a backend that
  stops answering (a database dropping packets fails nothing until the kernel gives up on
  the connection, a quarter of an hour later) would otherwise hold every invocation.
- ``flush()`` returns once everything accepted before it is written; ``aclose()`` flushes
  and stops the writer. If the backend is unavailable at close, every record not written is
  logged to ``esra.audit.unwritten`` and ``aclose()`` raises ``AuditUnavailableError``.

What can be lost is only what a killed process held in memory: at most the records accepted
in its last ``flush_interval_s`` plus one write (``wait_for_write=True`` closes that window
for every answered invocation: what it may still lose are records of invocations not yet
answered).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

import stamina

from esra.core._audit.codec import record_document
from esra.core._audit.record import AuditRecord
from esra.core._clock import SystemClock
from esra.core.exceptions import EsraError
from esra.core.ports import Clock

__all__ = [
    "AuditBackend",
    "AuditUnavailableError",
    "BatchingAuditSink",
    "deferred_audit_waits",
    "log_unwritten",
]

_log = logging.getLogger(__name__)
UNWRITTEN_LOGGER = "esra.audit.unwritten"


class AuditUnavailableError(EsraError):
    """Audit records cannot be made durable now, so the action they record must not proceed."""

    public_message = "The request could not be completed."


class AuditBackend(Protocol):
    """**Protocol:** durably appends a batch of records, all or none, in the order given."""

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Append ``records``; raise if they are not all durable."""
        ...


class _DeferredWaits:
    """The records an open ``deferred_audit_waits()`` block still has to see written."""

    def __init__(self) -> None:
        self.open = True
        # Per sink, the number of its last record accepted in the block: records are written
        # in order, so once that one is written all of the block's are.
        self.targets: dict[BatchingAuditSink, int] = {}


_DEFERRED: contextvars.ContextVar[_DeferredWaits | None] = contextvars.ContextVar(
    "esra_audit_deferred_waits", default=None
)


@contextlib.asynccontextmanager
async def deferred_audit_waits() -> AsyncIterator[None]:
    """One invocation's audit waits, deferred to its end: wrap the invocation, not more.

    Inside the block (and in tasks started from it), a ``BatchingAuditSink`` with
    ``wait_for_write`` accepts records without waiting for their write. Leaving the block —
    normally or by an exception — waits until every record accepted in it is written, so
    whoever answers after the block answers only once the invocation's records are durable.
    Other sinks are unaffected; a nested block leaves the waiting to the outermost one.

    Raises:
        AuditUnavailableError: on leaving the block, a record accepted in it could not be
            written (the backend became unavailable). The invocation must then not be
            answered with its results.
    """
    if _DEFERRED.get() is not None:
        yield
        return
    waits = _DeferredWaits()
    token = _DEFERRED.set(waits)
    try:
        yield
    except Exception:
        await _wait_all(waits)
        raise
    except BaseException:
        # Cancelled: nothing will be answered, so nothing waits. The records stay queued
        # and are written like any other.
        waits.open = False
        raise
    else:
        await _wait_all(waits)
    finally:
        _DEFERRED.reset(token)


async def _wait_all(waits: _DeferredWaits) -> None:
    # Closed first: a record made from now on (by a task the block started) waits itself.
    waits.open = False
    for sink, target in waits.targets.items():
        await sink._wait_written(target)


class _GiveUpError(Exception):
    """The writer stops retrying: the sink is closing and the backend is unavailable."""


class BatchingAuditSink:
    """Batches audit records onto ``backend``; see the module docstring for the guarantee.

    Args:
        backend: where batches go (``write_batch``).
        max_batch: the most records one ``write_batch`` call receives.
        flush_interval_s: the longest a record waits in the queue before its batch is written.
        queue_size: how many accepted, unwritten records may be held before ``record()`` waits.
        wait_for_write: ``record()`` returns only once its record is written.
        unavailable_after_s: how long writes may keep failing before ``record()`` refuses.
        retry_initial_s, retry_max_s: the backoff between failed writes.
        clock: measures how long writes have been failing.
    """

    def __init__(
        self,
        backend: AuditBackend,
        *,
        max_batch: int = 500,
        flush_interval_s: float = 0.1,
        queue_size: int = 10_000,
        wait_for_write: bool = False,
        unavailable_after_s: float = 30.0,
        retry_initial_s: float = 0.05,
        retry_max_s: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        if max_batch < 1 or queue_size < max_batch:
            msg = "max_batch must be at least 1 and queue_size at least max_batch"
            raise ValueError(msg)
        if flush_interval_s <= 0 or unavailable_after_s <= 0:
            msg = "flush_interval_s and unavailable_after_s must be positive"
            raise ValueError(msg)
        self._backend = backend
        self._max_batch = max_batch
        self._interval = flush_interval_s
        self._queue_size = queue_size
        self._wait_for_write = wait_for_write
        self._unavailable_after = unavailable_after_s
        self._retry_initial = retry_initial_s
        self._retry_max = retry_max_s
        self._clock = clock or SystemClock()
        self._pending: collections.deque[AuditRecord] = collections.deque()
        self._in_flight = 0
        self._accepted = 0
        self._written = 0
        # The last record someone waits for (flush(), a write-waiter): while it is not
        # written, the writer does not linger.
        self._wanted = 0
        self._unavailable = False
        self._closing = False
        self._changed: asyncio.Condition | None = None
        self._writer: asyncio.Task[None] | None = None
        self._abandoned: list[AuditRecord] = []
        # The task telling waiters a write hangs (kept: the loop holds tasks weakly).
        self._hang_notice: asyncio.Task[None] | None = None

    # -- observation -------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """False while writes have been failing for longer than ``unavailable_after_s``."""
        return not self._unavailable

    @property
    def written(self) -> int:
        """How many records the backend has accepted so far."""
        return self._written

    @property
    def queued(self) -> int:
        """How many accepted records are not yet written (the batch being written included)."""
        return len(self._pending) + self._in_flight

    async def ping(self) -> None:
        """Raise unless records can be made durable now (the host's readiness check).

        The sink must be available and not closing; a backend with a ``ping()`` of its own
        (a database log) must answer it, since an idle host writes nothing that would show
        its database gone.

        Raises:
            AuditUnavailableError: the sink refuses records, or is closing.
            Exception: whatever the backend's ``ping()`` raises.
        """
        if self._unavailable or self._closing:
            raise AuditUnavailableError
        ping = getattr(self._backend, "ping", None)
        if callable(ping):
            await ping()

    # -- the port ----------------------------------------------------------------------

    async def record(self, record: AuditRecord) -> None:
        """Accept ``record`` (waiting while the queue is full); see the module docstring.

        Raises:
            AuditUnavailableError: the sink is closed or its backend unavailable (the record
                is logged to ``esra.audit.unwritten``), or — with ``wait_for_write`` — the
                backend became unavailable before the record was written.
        """
        changed = self._condition()
        async with changed:
            await changed.wait_for(
                lambda: self._closing or self._unavailable or self.queued < self._queue_size
            )
            if self._closing or self._unavailable:
                log_unwritten([record], "refused")
                raise AuditUnavailableError
            self._pending.append(record)
            self._accepted += 1
            target = self._accepted
            self._start_writer()
            if len(self._pending) in {1, self._max_batch}:
                # Only the writer waits for records to arrive, and it acts on the first one
                # (it was idle) or on a full batch (it stops lingering); waking every waiter
                # for every record would cost the event loop a task switch each time.
                changed.notify_all()
        if self._wait_for_write:
            waits = _DEFERRED.get()
            if waits is not None and waits.open:
                waits.targets[self] = target
            else:
                await self._wait_written(target)

    async def flush(self) -> None:
        """Return once every record accepted before this call is written.

        Raises:
            AuditUnavailableError: the backend became unavailable first.
        """
        await self._wait_written(self._accepted)

    async def aclose(self) -> None:
        """Write everything accepted, then stop; later ``record()`` calls are refused.

        Raises:
            AuditUnavailableError: the backend was unavailable, so the records not written
                were logged to ``esra.audit.unwritten`` instead.
        """
        changed = self._condition()
        async with changed:
            self._closing = True
            changed.notify_all()
        if self._writer is not None:
            await self._writer
        if self._abandoned:
            count = len(self._abandoned)
            log_unwritten(self._abandoned, "abandoned at close")
            self._abandoned = []
            error = AuditUnavailableError()
            error.add_note(f"{count} audit records could not be written")
            raise error

    # -- the writer --------------------------------------------------------------------

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _start_writer(self) -> None:
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(
                self._run(), name="esra-audit-writer"
            )

    async def _wait_written(self, target: int) -> None:
        changed = self._condition()
        async with changed:
            if target > self._wanted:
                self._wanted = target
                changed.notify_all()
            await changed.wait_for(lambda: self._written >= target or self._stopped())
            if self._written < target:
                raise AuditUnavailableError

    def _stopped(self) -> bool:
        # Waiting on is pointless once the backend is unavailable or the writer has ended.
        writer_done = self._writer is not None and self._writer.done()
        return self._unavailable or writer_done

    def _lingering(self) -> bool:
        # Compared with what is written, not with whether anyone still waits: a waiter the
        # last batch satisfied has not run yet to say so, and must not start a batch nobody
        # needs now (that would be one more commit per invocation).
        return (
            not self._closing
            and self._wanted <= self._written
            and len(self._pending) < self._max_batch
        )

    async def _run(self) -> None:
        changed = self._condition()
        while True:
            async with changed:
                await changed.wait_for(lambda: bool(self._pending) or self._closing)
                if not self._pending:
                    return
                if self._lingering():
                    # Gather a batch: until it is full, someone wants it now, or the interval.
                    try:
                        async with asyncio.timeout(self._interval):
                            await changed.wait_for(lambda: not self._lingering())
                    except TimeoutError:
                        pass
                count = min(self._max_batch, len(self._pending))
                batch = [self._pending.popleft() for _ in range(count)]
                self._in_flight = count
            try:
                await self._write(batch)
            except _GiveUpError:
                async with changed:
                    self._abandoned = [*batch, *self._pending]
                    self._pending.clear()
                    self._in_flight = 0
                    changed.notify_all()
                return
            async with changed:
                self._in_flight = 0
                self._written += count
                self._unavailable = False
                changed.notify_all()

    async def _write(self, batch: Sequence[AuditRecord]) -> None:
        # Setting up stamina's retry loop costs more than a batch's own Python work, and
        # nearly every batch is written at the first try, so the loop starts only after a
        # failure; from then on its attempts, backoff and test mode are stamina's.
        try:
            await self._watched_write(batch)
        except Exception as exc:
            failing_since = await self._failed(batch, exc, None)
        else:
            return

        def retry(exc: BaseException) -> bool:
            # Only failed writes: stamina asks about a cancellation too, and retrying that
            # would leave a writer nobody can stop (a loop shutting down would hang on it).
            return isinstance(exc, Exception) and not isinstance(exc, _GiveUpError)

        while True:
            try:
                async for attempt in stamina.retry_context(
                    on=retry,
                    attempts=None,
                    timeout=None,
                    wait_initial=self._retry_initial,
                    wait_max=self._retry_max,
                    wait_jitter=self._retry_initial,
                ):
                    with attempt:
                        await self._check_give_up()
                        try:
                            await self._watched_write(batch)
                        except Exception as exc:
                            failing_since = await self._failed(batch, exc, failing_since)
                            raise
                return
            except _GiveUpError:
                raise
            except Exception:  # stamina's testing mode caps attempts: keep going
                await asyncio.sleep(self._retry_max)
                continue

    async def _watched_write(self, batch: Sequence[AuditRecord]) -> None:
        """The backend's write of ``batch``; one that has not returned after
        ``unavailable_after_s`` makes the sink unavailable while it goes on.

        The write is not cancelled: it may still commit, and the first write that returns
        makes the sink available again (``_run``). A timer rather than a task beside the
        write: it costs nearly nothing on the write that returns in time, which is every one.
        """
        loop = asyncio.get_running_loop()
        watchdog = loop.call_later(self._unavailable_after, self._write_hangs)
        try:
            await self._backend.write_batch(batch)
        finally:
            watchdog.cancel()

    def _write_hangs(self) -> None:
        # Set here, in the timer's own callback, never in a task that could run after the
        # write returned: _run clears the flag once the write returns, so it cannot stay set
        # with no write to clear it (a sink refusing every record would never write again).
        if not self._unavailable:
            _log.error(
                "audit backend unavailable: a batch write has not returned for %.1f s; "
                "refusing new audit records until it does",
                self._unavailable_after,
            )
        self._unavailable = True
        self._hang_notice = asyncio.get_running_loop().create_task(self._notify_waiters())

    async def _notify_waiters(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()

    async def _failed(
        self, batch: Sequence[AuditRecord], exc: Exception, failing_since: float | None
    ) -> float:
        """Log a failed write; refuse new records once writes have failed for too long.

        Returns when the writes started failing.
        """
        _log.warning(
            "audit batch of %d records not written (%s); retrying", len(batch), type(exc).__name__
        )
        now = self._clock.monotonic()
        since = now if failing_since is None else failing_since
        if now - since >= self._unavailable_after:
            await self._mark_unavailable()
        return since

    async def _mark_unavailable(self) -> None:
        changed = self._condition()
        async with changed:
            if not self._unavailable:
                _log.error("audit backend unavailable: refusing new audit records until it is back")
            self._unavailable = True
            changed.notify_all()

    async def _check_give_up(self) -> None:
        if self._closing and self._unavailable:
            raise _GiveUpError


def log_unwritten(records: Sequence[AuditRecord], why: str) -> None:
    """Log records that will not reach the backend, one JSON line each, so none is silent.

    Each goes to the ``esra.audit.unwritten`` logger at ERROR as ``audit record {why}: {json}``.
    """
    logger = logging.getLogger(UNWRITTEN_LOGGER)
    for record in records:
        logger.error("audit record %s: %s", why, json.dumps(record_document(record), default=str))
