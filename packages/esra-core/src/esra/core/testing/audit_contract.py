"""The reusable audit-log contract: what every durable ``AuditSink`` backend and reader obeys.

An adapter's test module subclasses ``AuditLogContract`` and implements ``make_log``, which
returns a fresh, empty log (or an awaitable of one) with ``write_batch`` and ``query``; and,
when it opened anything, ``close_log``::

    class TestMyAuditLog(AuditLogContract):
        def make_log(self, tmp_path):
            return MyAuditLog(tmp_path / "audit.db")

Records are written through ``BatchingAuditSink`` as a host writes them; nothing here
measures time: flushing, backpressure and retries are proved by counting records.
Requires ``pytest`` and ``pytest-asyncio``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
from collections.abc import Awaitable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Protocol

import pytest

from esra.core._audit.batching import BatchingAuditSink
from esra.core._audit.query import AuditCursor, AuditPage, AuditQuery
from esra.core._audit.record import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.testing._audit_log import FlakyBackend, GatedBackend

__all__ = ["AuditLog", "AuditLogContract", "contract_record"]

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
TENANT = "tenant-a"
OTHER = "tenant-b"
# Generous safety net for waits on the writer; no assertion depends on it.
_PATIENCE_S = 30.0


class AuditLog(Protocol):
    """What the suite needs of a log: the backend's write and the reader's query."""

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Append ``records``."""
        ...

    async def query(self, query: AuditQuery) -> AuditPage:
        """Read a page back."""
        ...


def contract_record(
    n: int,
    *,
    tenant: str = TENANT,
    event: AuditEvent = AuditEvent.INVOKE,
    at: datetime | None = None,
    correlation: str | None = None,
    **dimensions: str | int | float | bool | tuple[str, ...] | None,
) -> AuditRecord:
    """Record number ``n``: ``n`` seconds after T0 unless ``at`` says otherwise."""
    return AuditRecord(
        event=event,
        tenant_id=tenant,
        correlation_id=correlation or f"corr-{n}",
        at=at or T0 + timedelta(seconds=n),
        dimensions=dimensions,
    )


async def _all(log: AuditLog, query: AuditQuery) -> list[AuditRecord]:
    records: list[AuditRecord] = []
    cursor: AuditCursor | None = None
    while True:
        page = await log.query(
            AuditQuery(
                tenant_id=query.tenant_id,
                events=query.events,
                subject=query.subject,
                since=query.since,
                until=query.until,
                correlation_id=query.correlation_id,
                limit=query.limit,
                cursor=cursor,
            )
        )
        records.extend(page.records)
        if page.next_cursor is None:
            return records
        cursor = page.next_cursor


async def _until(predicate: object) -> None:
    async with asyncio.timeout(_PATIENCE_S):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.005)


class AuditLogContract:
    """Every rule of a durable audit log, one test each."""

    def make_log(self, tmp_path: Path) -> AuditLog | Awaitable[AuditLog]:
        """A fresh, empty log (override)."""
        raise NotImplementedError

    async def close_log(self, log: AuditLog) -> None:
        """Release what ``make_log`` opened (override when it opened anything)."""
        close = getattr(log, "close", None)
        if close is not None:
            result = close()
            if inspect.isawaitable(result):
                await result

    async def _open(self, tmp_path: Path) -> AuditLog:
        made = self.make_log(tmp_path)
        return await made if inspect.isawaitable(made) else made

    async def _write(self, log: AuditLog, *records: AuditRecord) -> None:
        sink = BatchingAuditSink(log, max_batch=7, flush_interval_s=0.01)
        for record in records:
            await sink.record(record)
        await sink.aclose()

    async def test_records_read_back_identical(self, tmp_path: Path) -> None:
        """Every field and dimension type survives the store; newest first."""
        log = await self._open(tmp_path)
        try:
            elsewhere = timezone(timedelta(hours=5, minutes=30))
            written = [
                contract_record(1, subject="alice", count=3, ratio=0.1, flag=True),
                AuditRecord(
                    event=AuditEvent.PLAN_REJECTED,
                    tenant_id=TENANT,
                    correlation_id="corr-2",
                    at=(T0 + timedelta(seconds=2, microseconds=123456)).astimezone(elsewhere),
                    outcome="denied",
                    reason="FIELD_RESTRICTED",
                    dimensions={"sources": ("s-1", "s-2"), "none": None, "empty": ()},
                ),
                contract_record(3, event=AuditEvent.ADMIN_SECRET_WRITE, note="é ✓ \u202e"),
            ]
            await self._write(log, *written)
            page = await log.query(AuditQuery(tenant_id=TENANT))
            assert list(page.records) == written[::-1]
            assert page.next_cursor is None
        finally:
            await self.close_log(log)

    async def test_one_tenant_never_reads_another(self, tmp_path: Path) -> None:
        """Same correlation id and caller in two tenants: each reads only its own."""
        log = await self._open(tmp_path)
        try:
            mine = contract_record(1, correlation="shared", subject="sam")
            theirs = contract_record(2, tenant=OTHER, correlation="shared", subject="sam")
            await self._write(log, mine, theirs)
            for query in (
                AuditQuery(tenant_id=TENANT),
                AuditQuery(tenant_id=TENANT, correlation_id="shared"),
                AuditQuery(tenant_id=TENANT, subject="sam"),
            ):
                assert list((await log.query(query)).records) == [mine]
            assert list((await log.query(AuditQuery(tenant_id=OTHER))).records) == [theirs]
            assert list((await log.query(AuditQuery(tenant_id="tenant-c"))).records) == []
        finally:
            await self.close_log(log)

    async def test_filters(self, tmp_path: Path) -> None:
        """Event, caller (subject or operator), time window and correlation id, combined."""
        log = await self._open(tmp_path)
        try:
            records = [
                contract_record(0, event=AuditEvent.INVOKE, subject="alice"),
                contract_record(1, event=AuditEvent.FETCH, subject="bob"),
                contract_record(2, event=AuditEvent.DOCUMENT_RELEASE, operator="alice"),
                contract_record(3, event=AuditEvent.INVOKE, subject="bob", correlation="c-x"),
                contract_record(4, event=AuditEvent.FETCH, subject="alice", correlation="c-x"),
                contract_record(5, event=AuditEvent.INVOKE),
            ]
            await self._write(log, *records)

            async def read(**filters: object) -> list[int]:
                query = AuditQuery(tenant_id=TENANT, **filters)  # type: ignore[arg-type]
                found = (await log.query(query)).records
                return [records.index(r) for r in found]

            assert await read(events={AuditEvent.FETCH}) == [4, 1]
            assert await read(events={AuditEvent.FETCH, AuditEvent.DOCUMENT_RELEASE}) == [4, 2, 1]
            assert await read(subject="alice") == [4, 2, 0]
            assert await read(correlation_id="c-x") == [4, 3]
            since, until = T0 + timedelta(seconds=1), T0 + timedelta(seconds=4)
            assert await read(since=since, until=until) == [3, 2, 1]  # since in, until out
            assert await read(since=since, until=until, subject="bob") == [3, 1]
            assert await read(events={AuditEvent.INVOKE}, subject="nobody") == []
        finally:
            await self.close_log(log)

    async def test_same_instant_newest_written_first(self, tmp_path: Path) -> None:
        """Records stamped alike come back in reverse insertion order, across pages too."""
        log = await self._open(tmp_path)
        try:
            records = [contract_record(n, at=T0) for n in range(5)]
            await self._write(log, *records)
            assert await _all(log, AuditQuery(tenant_id=TENANT, limit=2)) == records[::-1]
        finally:
            await self.close_log(log)

    async def test_pagination_has_no_gaps_or_repeats(self, tmp_path: Path) -> None:
        """25 records in pages of 10: 10, 10, 5, each exactly once; the last has no cursor."""
        log = await self._open(tmp_path)
        try:
            records = [
                contract_record(n, event=AuditEvent.FETCH if n % 3 else AuditEvent.INVOKE)
                for n in range(25)
            ]
            await self._write(log, *records)
            sizes: list[int] = []
            seen: list[AuditRecord] = []
            cursor: AuditCursor | None = None
            while True:
                page = await log.query(AuditQuery(tenant_id=TENANT, limit=10, cursor=cursor))
                sizes.append(len(page.records))
                seen.extend(page.records)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert sizes == [10, 10, 5]
            assert seen == records[::-1]
            fetches = await _all(log, AuditQuery(tenant_id=TENANT, events={"esra.fetch"}, limit=4))
            assert fetches == [r for r in records[::-1] if r.event is AuditEvent.FETCH]
            exact = await log.query(AuditQuery(tenant_id=TENANT, limit=25))
            assert len(exact.records) == 25
            assert exact.next_cursor is None
        finally:
            await self.close_log(log)

    async def test_close_flushes_what_was_accepted(self, tmp_path: Path) -> None:
        """A long interval: nothing is written until close, then everything is."""
        log = await self._open(tmp_path)
        try:
            sink = BatchingAuditSink(log, max_batch=100, flush_interval_s=3600)
            for n in range(7):
                await sink.record(contract_record(n))
            assert sink.queued == 7
            await sink.aclose()
            assert len(await _all(log, AuditQuery(tenant_id=TENANT))) == 7
        finally:
            await self.close_log(log)

    async def test_written_within_the_interval_without_flush(self, tmp_path: Path) -> None:
        """The writer flushes on its own: records become readable with no flush or close."""
        log = await self._open(tmp_path)
        try:
            sink = BatchingAuditSink(log, max_batch=100, flush_interval_s=0.02)
            for n in range(3):
                await sink.record(contract_record(n))
            await _until(lambda: sink.written == 3)
            assert len((await log.query(AuditQuery(tenant_id=TENANT))).records) == 3
            await sink.aclose()
        finally:
            await self.close_log(log)

    async def test_a_slow_backend_makes_record_wait_never_drop(self, tmp_path: Path) -> None:
        """Queue of 4 over a stalled backend: 6 of 10 producers wait; all 10 land."""
        log = await self._open(tmp_path)
        try:
            gated = GatedBackend(log)
            sink = BatchingAuditSink(gated, max_batch=2, flush_interval_s=0.01, queue_size=4)
            producers = [asyncio.create_task(sink.record(contract_record(n))) for n in range(10)]
            await _until(lambda: gated.waiting == 1 and sink.queued == 4)
            await asyncio.sleep(0.05)  # let any producer that could wrongly pass do so
            assert sum(task.done() for task in producers) == 4
            gated.gate.set()
            await asyncio.gather(*producers)
            await sink.aclose()
            assert len(await _all(log, AuditQuery(tenant_id=TENANT))) == 10
        finally:
            await self.close_log(log)

    async def test_failed_writes_are_retried_without_loss_or_duplicates(
        self, tmp_path: Path
    ) -> None:
        """The first three writes fail; every record is stored exactly once."""
        log = await self._open(tmp_path)
        try:
            flaky = FlakyBackend(log, failures=3)
            sink = BatchingAuditSink(
                flaky, max_batch=3, flush_interval_s=0.01, retry_initial_s=0.001, retry_max_s=0.01
            )
            records = [contract_record(n) for n in range(8)]
            for record in records:
                await sink.record(record)
            await sink.aclose()
            assert flaky.attempts >= 3 + 3  # three failures, then at least three batches
            assert await _all(log, AuditQuery(tenant_id=TENANT)) == records[::-1]
        finally:
            await self.close_log(log)

    async def test_no_record_lost_across_close(self, tmp_path: Path) -> None:
        """20 concurrent producers of 15 records each, then close: all 300 are stored."""
        log = await self._open(tmp_path)
        try:
            sink = BatchingAuditSink(log, max_batch=16, flush_interval_s=0.01, queue_size=32)

            async def produce(worker: int) -> None:
                for n in range(15):
                    await sink.record(
                        contract_record(n, correlation=f"w{worker}-{n}", tenant=TENANT)
                    )

            await asyncio.gather(*(produce(w) for w in range(20)))
            await sink.aclose()
            stored = await _all(log, AuditQuery(tenant_id=TENANT, limit=1000))
            assert sorted(r.correlation_id for r in stored) == sorted(
                f"w{w}-{n}" for w in range(20) for n in range(15)
            )
        finally:
            await self.close_log(log)

    async def test_a_forged_cursor_is_refused(self) -> None:
        """A cursor the reader never issued is a classified error, not a crash."""
        from esra.core._audit.query import AuditCursorError  # noqa: PLC0415

        # The last nests past the JSON decoder's recursion limit.
        deep = base64.urlsafe_b64encode(b"[" * 100_000).decode()
        for forged in ("", "not-base64!", "eyJhdCI6IDF9", "e30", deep):
            with pytest.raises(AuditCursorError):
                AuditCursor.decode(forged)
