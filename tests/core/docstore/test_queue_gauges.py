"""The queue readings the gauges publish: the latest per tenant, aged at observation."""

from __future__ import annotations

import pytest

from esra.core._docstore.queue_gauges import QueueReadings, read_queue, readings
from esra.core._docstore.queue_stats import QueueStats
from esra.core.testing import FakeClock, InMemoryDocumentRepository
from esra.core.testing.docstore_contract import contract_upload

TENANT = "tenant-unreadable-queue"


class _Unreadable(InMemoryDocumentRepository):
    async def queue_stats(self, tenant_id: str) -> QueueStats:
        raise OSError("postgresql://user:secret@db/store is gone")


def _observed(readings: QueueReadings) -> dict[str, tuple[object, object]]:
    depths = {o.attributes["esra.tenant.id"]: o.value for o in readings.depths() if o.attributes}
    ages = {o.attributes["esra.tenant.id"]: o.value for o in readings.ages() if o.attributes}
    return {str(t): (depths[t], ages[t]) for t in depths}


def test_the_latest_reading_wins_and_its_age_grows_with_the_clock() -> None:
    """A second reading replaces the first; the age is the clock's, at each observation."""
    clock = FakeClock()
    readings = QueueReadings()
    readings.record("t-1", QueueStats(4, clock.now()), clock)
    clock.advance(10)
    readings.record("t-1", QueueStats(2, clock.now()), clock)
    readings.record("t-2", QueueStats(), clock)
    clock.advance(5)
    assert _observed(readings) == {"t-1": (2, 5.0), "t-2": (0, 0.0)}
    clock.advance(5)
    assert _observed(readings) == {"t-1": (2, 10.0), "t-2": (0, 0.0)}


async def test_an_unreadable_queue_keeps_the_previous_reading(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The read fails: nothing is raised into the worker's turn, the last reading stands,
    and the log names the error's type, never its message."""
    clock = FakeClock()
    healthy = InMemoryDocumentRepository()
    await healthy.add(TENANT, contract_upload("a.txt", "Waiting."), scope="all", now=clock.now())
    await read_queue(healthy, TENANT, clock=clock)
    await read_queue(_Unreadable(), TENANT, clock=clock)
    assert _observed(readings())[TENANT] == (1, 0.0)
    assert "OSError" in caplog.text
    assert "secret" not in caplog.text
