"""``esra worker`` over several stores: no store is always served first.

Before, every turn of every worker went through the stores in sorted order of location, so
with a store per tenant every worker started on the same one. Now the stores, like the
tenants in one, are served in the worker's ``RoundRobin``: the first turn starts where the
worker's id puts it, and each later turn continues after the last store served.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from esra.core._docstore.ingestion import upload_files
from esra.core._docstore.model import StoreSettings
from esra.core.docstore import RoundRobin
from esra.core.testing import FakeClock
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._worker import run_worker

TENANTS = ("acme", "globex", "initech")


async def _queue(path: Path, tenant: str, count: int) -> None:
    repository = SqliteDocumentRepository(path)
    try:
        await repository.initialize()
        files = [
            (f"{tenant}-{n}.md", f"# {tenant} {n}\n\nThe quokka ledger, entry {n}.\n".encode())
            for n in range(count)
        ]
        outcomes = await upload_files(repository, tenant, files, scope="general", clock=FakeClock())
        assert all(o.document is not None for o in outcomes)
    finally:
        await repository.close()


async def _served_in_order(
    tmp_path: Path, worker_id: str, caplog: pytest.LogCaptureFixture
) -> list[str]:
    """The tenants one drain served, in order, over a store file per tenant (two turns)."""
    stores = {tenant: tmp_path / worker_id / f"{tenant}.db" for tenant in TENANTS}
    for tenant, path in stores.items():
        path.parent.mkdir(exist_ok=True)
        await _queue(path, tenant, 2)
    caplog.clear()
    report = await run_worker(
        stores,
        stop=asyncio.Event(),
        worker_id=worker_id,
        clock=FakeClock(),
        once=True,
        settings_for=lambda _tenant: StoreSettings(batch_per_tenant=1),
    )
    assert report.indexed == 2 * len(TENANTS)
    return [
        message.split(":", 1)[0].removeprefix("tenant ")
        for message in (r.getMessage() for r in caplog.records)
        if message.startswith("tenant ") and "claimed 1" in message
    ]


async def test_workers_start_on_the_store_their_id_gives_and_go_round(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Three stores, two documents each, a batch of one: each worker serves every store
    once per turn, starting where its id puts it, and its second turn goes on round —
    and workers with different ids do not all start on the first store."""
    caplog.set_level(logging.INFO, logger="esra.starlette._worker")
    starts = set()
    for worker_id in ("A", "B", "w-0", "w-1"):
        served = await _served_in_order(tmp_path, worker_id, caplog)
        # The stores sort by location, as the tenants do here.
        first_turn = RoundRobin(worker_id).order(TENANTS)
        assert served == first_turn * 2
        starts.add(served[0])
    assert len(starts) > 1
