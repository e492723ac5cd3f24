"""deferred_audit_waits: an invocation's records are awaited once, at its end — proved by counting.

With ``wait_for_write`` every ``record()`` used to wait for its own commit, so an invocation's
records were committed one after another. Inside ``deferred_audit_waits()`` they are only
accepted, and leaving the block waits for all of them: still durable before the invocation
is answered, in one commit (shared with every invocation waiting at the same moment).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from esra.core._audit.batching import (
    AuditUnavailableError,
    BatchingAuditSink,
    deferred_audit_waits,
)
from esra.core._audit.record import AuditRecord
from esra.core.testing import FakeClock
from esra.core.testing._audit_log import GatedBackend, InMemoryAuditLog
from esra.core.testing.audit_contract import contract_record

_PATIENCE_S = 10.0
# Far longer than any test runs: a batch written is one somebody asked for, never a timeout.
_NEVER_S = 3600.0


async def _until(predicate: object) -> None:
    async with asyncio.timeout(_PATIENCE_S):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.002)


async def _settle() -> None:
    """Let every task that can run, run (the writer included)."""
    for _ in range(50):
        await asyncio.sleep(0)


class _Down:
    """A backend that fails every write; counts attempts."""

    def __init__(self) -> None:
        self.attempts = 0

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        self.attempts += 1
        msg = "connection refused"
        raise ConnectionRefusedError(msg)


async def test_an_invocation_s_records_are_written_by_one_commit() -> None:
    """Five records in the block: one write_batch of five, not five of one."""
    log = InMemoryAuditLog()
    sink = BatchingAuditSink(log, flush_interval_s=_NEVER_S, wait_for_write=True)
    async with deferred_audit_waits():
        for n in range(5):
            await sink.record(contract_record(n))
    assert log.batches == [5]
    assert [r.correlation_id for r in log.records] == [f"corr-{n}" for n in range(5)]
    await sink.aclose()


async def test_without_the_block_each_record_waits_for_its_own_commit() -> None:
    """The behaviour the block replaces: one commit per record, one after another."""
    log = InMemoryAuditLog()
    sink = BatchingAuditSink(log, flush_interval_s=_NEVER_S, wait_for_write=True)
    for n in range(5):
        await sink.record(contract_record(n))
    assert log.batches == [1, 1, 1, 1, 1]
    await sink.aclose()


async def test_leaving_the_block_waits_until_every_record_is_written() -> None:
    """record() returns while the backend holds the write; the block's end does not."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)
    accepted = asyncio.Event()

    async def invocation() -> str:
        async with deferred_audit_waits():
            for n in range(3):
                await sink.record(contract_record(n))
            accepted.set()
        return "answer"

    task = asyncio.create_task(invocation())
    await _until(accepted.is_set)  # every record() returned with nothing written
    assert sink.written == 0
    await _until(lambda: gated.waiting == 1)  # the block's end asked for the write
    await _settle()
    assert not task.done()  # no answer before the records are durable
    gated.gate.set()
    assert await task == "answer"
    assert len(log.records) == 3
    await sink.aclose()


async def test_an_invocation_that_fails_still_waits_for_its_records() -> None:
    """An error leaving the block is raised only once the records are written."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)

    async def invocation() -> None:
        async with deferred_audit_waits():
            await sink.record(contract_record(1))
            msg = "the search failed"
            raise ValueError(msg)

    task = asyncio.create_task(invocation())
    await _until(lambda: gated.waiting == 1)
    await _settle()
    assert not task.done()
    gated.gate.set()
    with pytest.raises(ValueError, match="the search failed"):
        await task
    assert len(log.records) == 1
    await sink.aclose()


async def test_concurrent_invocations_share_one_commit() -> None:
    """Eight invocations of five records ending together: one write_batch of forty."""
    log = InMemoryAuditLog()
    sink = BatchingAuditSink(log, flush_interval_s=_NEVER_S, wait_for_write=True)
    all_recorded = asyncio.Barrier(8)

    async def invocation(worker: int) -> None:
        async with deferred_audit_waits():
            for n in range(5):
                await sink.record(contract_record(worker * 10 + n))
            await all_recorded.wait()

    await asyncio.gather(*(invocation(w) for w in range(8)))
    assert log.batches == [40]
    await sink.aclose()


async def test_a_satisfied_waiter_does_not_start_a_batch_nobody_waits_for() -> None:
    """A record accepted while an earlier batch is written waits for its own invocation's end.

    Counting who waits (rather than comparing with what is written) would still see the
    first waiter, not yet resumed, right after its batch: the writer would commit the second
    record at once, one commit more for the second invocation.
    """
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)
    first = asyncio.create_task(sink.record(contract_record(1)))  # waits for its commit
    await _until(lambda: gated.waiting == 1)
    async with deferred_audit_waits():
        async with asyncio.timeout(_PATIENCE_S):  # accepted, not waited for
            await sink.record(contract_record(2))  # queued behind the batch being written
        gated.gate.set()
        await first
        await _settle()
        assert log.batches == [1]  # the second record lingers: nobody needs it yet
        assert sink.queued == 1
    assert log.batches == [1, 1]
    await sink.aclose()


async def test_a_record_the_backend_cannot_take_fails_the_block() -> None:
    """The backend becomes unavailable: leaving the block raises, the caller gets no answer."""
    clock, backend = FakeClock(), _Down()
    sink = BatchingAuditSink(
        backend,
        flush_interval_s=0.005,
        unavailable_after_s=30.0,
        retry_initial_s=0.001,
        retry_max_s=0.002,
        wait_for_write=True,
        clock=clock,
    )
    answered = False

    async def invocation() -> None:
        nonlocal answered
        async with deferred_audit_waits():
            await sink.record(contract_record(1))
        answered = True

    task = asyncio.create_task(invocation())
    await _until(lambda: backend.attempts >= 1)
    clock.advance(31)
    with pytest.raises(AuditUnavailableError):
        await task
    assert not answered
    # Unavailable now: a record is refused at once, inside the block as outside it.
    with pytest.raises(AuditUnavailableError):
        async with deferred_audit_waits():
            await sink.record(contract_record(2))
    with pytest.raises(AuditUnavailableError):
        await sink.aclose()


async def test_a_full_queue_still_makes_the_invocation_wait() -> None:
    """Deferring the write wait does not defer backpressure: record() waits for room."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(
        gated, flush_interval_s=_NEVER_S, max_batch=2, queue_size=2, wait_for_write=True
    )

    async def invocation() -> None:
        async with deferred_audit_waits():
            for n in range(3):
                await sink.record(contract_record(n))

    task = asyncio.create_task(invocation())
    await _until(lambda: gated.waiting == 1)  # a full batch goes out without anyone waiting
    await _settle()
    assert sink.queued == 2  # the third record has no room yet
    assert not task.done()
    gated.gate.set()
    await task
    assert len(log.records) == 3
    await sink.aclose()


async def test_a_nested_block_leaves_the_wait_to_the_outer_one() -> None:
    """Only the outermost block waits; the invocation is still answered after its records."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)
    inner_done = asyncio.Event()

    async def invocation() -> None:
        async with deferred_audit_waits():
            async with deferred_audit_waits():
                await sink.record(contract_record(1))
            inner_done.set()
            await sink.record(contract_record(2))

    task = asyncio.create_task(invocation())
    await _until(inner_done.is_set)
    assert sink.written == 0
    await _until(lambda: gated.waiting == 1)
    await _settle()
    assert not task.done()
    gated.gate.set()
    await task
    assert [r.correlation_id for r in log.records] == ["corr-1", "corr-2"]
    await sink.aclose()


async def test_a_record_made_after_the_block_ended_waits_for_itself() -> None:
    """A task the block started that records later is not covered by the block's wait."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)
    go = asyncio.Event()

    async def late() -> None:
        await go.wait()
        await sink.record(contract_record(1))

    async with deferred_audit_waits():
        straggler = asyncio.create_task(late())
    go.set()
    await _until(lambda: gated.waiting == 1)
    await _settle()
    assert not straggler.done()  # it waits for its own write, as without the block
    gated.gate.set()
    await straggler
    assert len(log.records) == 1
    await sink.aclose()


async def test_a_cancelled_invocation_does_not_wait_and_loses_nothing() -> None:
    """Cancelled: nothing will be answered, so the block does not wait; the records stay."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S, wait_for_write=True)
    recorded = asyncio.Event()

    async def invocation() -> None:
        async with deferred_audit_waits():
            await sink.record(contract_record(1))
            recorded.set()
            await asyncio.Event().wait()  # a search that never ends

    task = asyncio.create_task(invocation())
    await _until(recorded.is_set)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gated.gate.set()
    await sink.aclose()
    assert len(log.records) == 1


async def test_a_sink_without_wait_for_write_is_unaffected() -> None:
    """Without wait_for_write nothing waits for the write, in the block or out of it."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=_NEVER_S)
    async with deferred_audit_waits():
        await sink.record(contract_record(1))
    assert sink.written == 0
    gated.gate.set()
    await sink.aclose()
    assert len(log.records) == 1
