"""The order a worker serves tenants in: no tenant is always first.

Before, every turn of every worker served the tenants in sorted order, so every worker started
on the same tenant and, with a large batch, tenant "a..." was always served while "z..."
waited. Now a worker's first turn starts at a position derived from its id (so workers spread
over the tenants, deterministically), and each later turn continues after the last tenant it
served — a round robin across turns, whatever tenants come and go.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from esra.core._docstore.ingestion import IngestionWorker, RoundRobin, upload_files
from esra.core._docstore.model import Claim, IndexedContent, StoreSettings
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANTS = tuple(f"tenant-{letter}" for letter in "abcde")


async def _queue(
    repository: InMemoryDocumentRepository, clock: FakeClock, tenant: str, count: int = 1
) -> None:
    for n in range(count):
        name = f"{tenant}-{n}.md"
        files = [(name, f"# {name}\n\nThe quokka ledger of {tenant}, entry {n}.\n".encode())]
        (outcome,) = await upload_files(repository, tenant, files, scope="all", clock=clock)
        assert outcome.document is not None
        clock.advance(1)


def _worker(
    repository: InMemoryDocumentRepository, clock: FakeClock, worker_id: str, batch: int = 1
) -> IngestionWorker:
    settings = StoreSettings(batch_per_tenant=batch)
    return IngestionWorker(
        repository, worker_id=worker_id, clock=clock, settings_for=lambda _t: settings
    )


async def _served(worker: IngestionWorker, *, stop: asyncio.Event | None = None) -> list[str]:
    return [turn.tenant_id for turn in await worker.run_turn(stop=stop)]


def _rotated(start: str) -> list[str]:
    at = TENANTS.index(start)
    return [*TENANTS[at:], *TENANTS[:at]]


async def test_workers_with_different_ids_start_on_different_tenants() -> None:
    """The attack: five tenants with a long queue each, several workers. Before, all of them
    started on tenant-a. Now each starts where its id puts it — the same place for the same
    id — and the workers do not all start on one tenant."""
    starts: dict[str, str] = {}
    for worker_id in ("A", "B", "w-0", "w-1", "w-2", "w-3"):
        repository, clock = InMemoryDocumentRepository(), FakeClock()
        for tenant in TENANTS:
            await _queue(repository, clock, tenant, 2)
        served = await _served(_worker(repository, clock, worker_id))
        assert served == _rotated(served[0])  # every tenant once, in a rotated order
        starts[worker_id] = served[0]
    assert starts["A"] != starts["B"]
    assert len(set(starts.values())) > 1


async def test_the_same_worker_id_always_starts_at_the_same_position() -> None:
    """Deterministic: the position comes from the id, not from chance."""
    assert RoundRobin("A").order(TENANTS) == RoundRobin("A").order(reversed(TENANTS))
    assert RoundRobin("A").order(TENANTS) != RoundRobin("B").order(TENANTS)


class _StoppingStore(InMemoryDocumentRepository):
    """Asks the worker to stop as it completes a document, while ``stop_on_complete`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.stop_on_complete: asyncio.Event | None = None

    async def complete(self, claim: Claim, content: IndexedContent, *, now: datetime) -> bool:
        if self.stop_on_complete is not None:
            self.stop_on_complete.set()
        return await super().complete(claim, content, now=now)


async def test_a_worker_continues_after_the_tenant_it_ended_on() -> None:
    """A turn cut short by a stop during tenant X's first document: the worker's next turn
    starts right after X, not back at its first tenant (which would serve X twice before
    the others once)."""
    repository, clock = _StoppingStore(), FakeClock()
    for tenant in TENANTS:
        await _queue(repository, clock, tenant, 3)
    worker = _worker(repository, clock, "A", batch=3)
    first = RoundRobin("A").order(TENANTS)[0]
    stop = asyncio.Event()
    repository.stop_on_complete = stop
    assert await _served(worker, stop=stop) == [first]
    repository.stop_on_complete = None
    assert await _served(worker) == [*_rotated(first)[1:], first]


async def test_a_full_pass_goes_on_round_robin_and_a_new_tenant_takes_its_place() -> None:
    """Turn after turn the worker cycles through the tenants, each served once per cycle;
    a tenant that appears is served where its name falls after the last one served."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    for tenant in TENANTS:
        await _queue(repository, clock, tenant, 3)
    worker = _worker(repository, clock, "B")
    first = await _served(worker)
    assert first == _rotated(first[0])
    await _queue(repository, clock, first[-1] + "-late")
    second = await _served(worker)
    assert second == [first[-1] + "-late", *first]


def test_round_robin_over_nothing_is_empty() -> None:
    assert RoundRobin("A").order([]) == []
