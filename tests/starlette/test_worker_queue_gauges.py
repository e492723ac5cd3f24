"""``esra worker`` publishes each tenant's queue depth and age through the gauges.

Read back through the in-memory SDK: after a turn that left documents waiting, the depth is
what is left and the age how long the oldest has waited on the worker's clock; a tenant
drained in the same turn reads zero.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from esra.core._docstore.ingestion import upload_files
from esra.core._docstore.model import Claim, IndexedContent, StoreSettings
from esra.core._telemetry import TENANT_ID
from esra.core.testing import FakeClock
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._worker import run_worker
from tests._telemetry import Recorded, recording

ACME, GLOBEX = "acme-queue-gauges", "globex-queue-gauges"


async def _queue(path: Path, tenant: str, count: int, clock: FakeClock) -> None:
    repository = SqliteDocumentRepository(path)
    try:
        await repository.initialize()
        files = [
            (f"memo-{n}.md", f"# Memo {n}\n\nQuokka tools, {n} of them.\n".encode())
            for n in range(count)
        ]
        outcomes = await upload_files(repository, tenant, files, scope="general", clock=clock)
        assert all(o.document is not None for o in outcomes)
    finally:
        await repository.close()


def _gauge(recorded: Recorded, name: str) -> dict[str, float]:
    return {
        str(a[TENANT_ID]): p.value
        for a, p in recorded.points(name)
        if a[TENANT_ID] in (ACME, GLOBEX)
    }


async def test_a_turn_leaves_the_depth_and_age_of_what_still_waits(tmp_path: Path) -> None:
    """Acme's five documents, two per turn, and a stop after the first turn: three wait,
    uploaded 90 s before the worker's clock reads; Globex's two are drained: zero."""
    clock = FakeClock()
    await _queue(tmp_path / "acme.db", ACME, 5, clock)
    await _queue(tmp_path / "globex.db", GLOBEX, 2, clock)
    stop = asyncio.Event()
    indexed: list[str] = []

    async def stop_after_the_first_turn(claim: Claim, _content: IndexedContent) -> None:
        clock.advance(45)
        indexed.append(claim.document_id)
        if len(indexed) == 4:  # two per store: the first turn's last document
            stop.set()  # a stop ends a turn after the document in hand: this is the last

    with recording() as recorded:
        report = await run_worker(
            {ACME: tmp_path / "acme.db", GLOBEX: tmp_path / "globex.db"},
            stop=stop,
            worker_id="w-gauges",
            clock=clock,
            settings_for=lambda _tenant: StoreSettings(batch_per_tenant=2),
            on_indexed=stop_after_the_first_turn,
        )
        assert report.turns == 1
        assert _gauge(recorded, "esra.ingestion.queue.depth") == {ACME: 3, GLOBEX: 0}
        # Four documents indexed (two per tenant) at 45 s each on the worker's clock.
        assert _gauge(recorded, "esra.ingestion.queue.age") == {ACME: 180.0, GLOBEX: 0.0}
        clock.advance(20)
        # The age keeps growing while the documents wait; the depth is the last reading.
        assert _gauge(recorded, "esra.ingestion.queue.age") == {ACME: 200.0, GLOBEX: 0.0}
        assert _gauge(recorded, "esra.ingestion.queue.depth") == {ACME: 3, GLOBEX: 0}
