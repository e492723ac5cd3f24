"""BatchingAuditSink: backpressure, retries, unavailability and close — proved by counting."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from esra.core._audit.batching import AuditUnavailableError, BatchingAuditSink
from esra.core._audit.record import AuditRecord
from esra.core.testing import FakeClock
from esra.core.testing._audit_log import GatedBackend, InMemoryAuditLog
from esra.core.testing.audit_contract import contract_record

_PATIENCE_S = 30.0


async def _until(predicate: object) -> None:
    async with asyncio.timeout(_PATIENCE_S):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.002)


class _Down:
    """A backend that fails until ``up`` is set; counts attempts."""

    def __init__(self) -> None:
        self.up = False
        self.attempts = 0
        self.log = InMemoryAuditLog()

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        self.attempts += 1
        if not self.up:
            msg = "connection refused"
            raise ConnectionRefusedError(msg)
        await self.log.write_batch(records)


def _sink(backend: object, clock: FakeClock, **options: object) -> BatchingAuditSink:
    return BatchingAuditSink(
        backend,  # type: ignore[arg-type]
        flush_interval_s=0.005,
        unavailable_after_s=30.0,
        retry_initial_s=0.001,
        retry_max_s=0.002,
        clock=clock,
        **options,  # type: ignore[arg-type]
    )


async def test_a_backend_that_stays_down_refuses_new_records_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Down past the limit: record() raises, and close logs every unwritten record."""
    clock, backend = FakeClock(), _Down()
    sink = _sink(backend, clock)
    await sink.record(contract_record(1))  # accepted: the backend is not yet known down
    await _until(lambda: backend.attempts >= 2)
    assert sink.available
    clock.advance(31)
    await _until(lambda: not sink.available)
    caplog.set_level(logging.ERROR, logger="esra.audit.unwritten")
    with pytest.raises(AuditUnavailableError):
        await sink.record(contract_record(2))
    with pytest.raises(AuditUnavailableError):
        await sink.aclose()
    unwritten = [r.getMessage() for r in caplog.records if r.name == "esra.audit.unwritten"]
    assert len(unwritten) == 2
    assert "corr-2" in unwritten[0]
    assert "refused" in unwritten[0]
    assert "corr-1" in unwritten[1]
    assert "abandoned at close" in unwritten[1]
    assert backend.log.records == []


async def test_a_backend_that_comes_back_gets_the_held_records_once() -> None:
    """Unavailable, then up again: the held record is written once; records are accepted."""
    clock, backend = FakeClock(), _Down()
    sink = _sink(backend, clock)
    await sink.record(contract_record(1))
    await _until(lambda: backend.attempts >= 1)
    clock.advance(31)
    await _until(lambda: not sink.available)
    backend.up = True
    await _until(lambda: sink.available)
    await sink.record(contract_record(2))
    await sink.aclose()
    assert [r.correlation_id for r in backend.log.records] == ["corr-1", "corr-2"]


async def test_wait_for_write_returns_only_once_written() -> None:
    """With wait_for_write, record() is pending while its batch is held back."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(gated, flush_interval_s=3600, wait_for_write=True)
    task = asyncio.create_task(sink.record(contract_record(1)))
    # No lingering for an hour: a waiting writer is served at once.
    await _until(lambda: gated.waiting == 1)
    assert not task.done()
    gated.gate.set()
    await task
    assert sink.written == 1
    await sink.aclose()


async def test_wait_for_write_fails_when_the_backend_is_unavailable() -> None:
    """A waiter learns the write did not happen rather than waiting for ever."""
    clock, backend = FakeClock(), _Down()
    sink = _sink(backend, clock, wait_for_write=True)
    task = asyncio.create_task(sink.record(contract_record(1)))
    await _until(lambda: backend.attempts >= 1)
    clock.advance(31)
    with pytest.raises(AuditUnavailableError):
        await task
    with pytest.raises(AuditUnavailableError):
        await sink.aclose()


async def test_a_write_that_never_returns_makes_the_sink_unavailable_meanwhile() -> None:
    """A backend that stops answering fails nothing: the write hangs (until the kernel gives
    up on the connection). Past unavailable_after_s its waiter is told, new records are
    refused at once, and the write is left to finish: when it does, the sink is available
    again and the record is written once."""
    log = InMemoryAuditLog()
    gated = GatedBackend(log)
    sink = BatchingAuditSink(
        gated, flush_interval_s=0.001, wait_for_write=True, unavailable_after_s=0.05
    )
    waiting = asyncio.create_task(sink.record(contract_record(1)))
    with pytest.raises(AuditUnavailableError):
        async with asyncio.timeout(_PATIENCE_S):  # without the watchdog: for ever
            await waiting
    assert gated.waiting == 1  # still writing: not cancelled
    with pytest.raises(AuditUnavailableError):
        await sink.record(contract_record(2))
    gated.gate.set()
    await _until(lambda: sink.available)
    await sink.record(contract_record(3))
    assert [r.correlation_id for r in log.records] == ["corr-1", "corr-3"]
    await sink.aclose()


async def test_flush_writes_everything_accepted_so_far() -> None:
    """flush() under an hour-long interval: everything accepted is written when it returns."""
    log = InMemoryAuditLog()
    sink = BatchingAuditSink(log, flush_interval_s=3600, max_batch=4)
    for n in range(10):
        await sink.record(contract_record(n))
    await sink.flush()
    assert sink.written == 10
    assert [r.correlation_id for r in log.records] == [f"corr-{n}" for n in range(10)]
    assert max(log.batches) <= 4
    await sink.aclose()


async def test_a_closed_sink_refuses_records() -> None:
    """After aclose() nothing is accepted silently."""
    sink = BatchingAuditSink(InMemoryAuditLog())
    await sink.aclose()
    await sink.aclose()  # idempotent
    with pytest.raises(AuditUnavailableError):
        await sink.record(contract_record(1))


def test_bad_settings_are_refused() -> None:
    """A queue smaller than a batch, or a non-positive interval, is a configuration error."""
    with pytest.raises(ValueError, match="queue_size"):
        BatchingAuditSink(InMemoryAuditLog(), max_batch=10, queue_size=5)
    with pytest.raises(ValueError, match="positive"):
        BatchingAuditSink(InMemoryAuditLog(), flush_interval_s=0)
