"""A stop asked for while a turn runs takes effect between documents, not between turns.

Before, ``run_turn()`` drained a whole batch (up to 1,000 documents) of every tenant with work
before the loop looked at its stop event, so ``systemctl stop`` waited for thousands of
documents and ended in a SIGKILL, leaving the document in hand to its lease. Now the document
in hand is finished (its completion written, its heartbeat stopped), nothing more is claimed,
and the turn reports that it stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from esra.core._docstore import extraction, ingestion
from esra.core._docstore.ingestion import IngestionWorker, TenantTurn, upload_files
from esra.core._docstore.model import StoreSettings
from esra.core._docstore.sandbox import SandboxUnavailableError
from esra.core._docstore.upload import AcceptedUpload
from esra.core._docstore.worker_loop import TurnTotals, run_turns
from esra.core.codes import DocumentRefusal
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANTS = ("tenant-a", "tenant-b")
HANG_GUARD_S = 60  # a guard against a hang, never an assertion about speed


class _StopDuring:
    """Asks the worker to stop while it extracts the document titled ``title``.

    Extraction runs in a worker thread, so the event is set through the loop; the request is
    queued before the extraction returns, so the worker sees it as soon as it resumes.
    """

    def __init__(self, stop: asyncio.Event, title: str) -> None:
        self.stop = stop
        self.title = title
        self.extracted: list[str] = []
        self._loop = asyncio.get_running_loop()

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def extract(upload: AcceptedUpload, **kwargs: Any) -> Any:
            self.extracted.append(upload.display_name)
            if upload.display_name == self.title:
                self._loop.call_soon_threadsafe(self.stop.set)
            return real(upload, **kwargs)

        return extract


@pytest.fixture
def stop() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture
async def stop_during_first(stop: asyncio.Event, monkeypatch: pytest.MonkeyPatch) -> _StopDuring:
    """The stop is asked for while ``tenant-a``'s first document is being extracted."""
    requester = _StopDuring(stop, "a-0.md")
    monkeypatch.setattr(ingestion, "extract", requester.wrap(extraction.extract))
    return requester


async def _queue(repository: InMemoryDocumentRepository, clock: FakeClock, count: int) -> None:
    """``count`` documents per tenant, oldest first (``a-0.md`` is tenant-a's oldest)."""
    for tenant in TENANTS:
        for n in range(count):
            name = f"{tenant[-1]}-{n}.md"
            files = [(name, f"# {name}\n\nThe quokka ledger, entry {n}.\n".encode())]
            (outcome,) = await upload_files(repository, tenant, files, scope="all", clock=clock)
            assert outcome.document is not None
            clock.advance(1)


def _worker(
    repository: InMemoryDocumentRepository, clock: FakeClock, *, batch: int = 1000
) -> IngestionWorker:
    settings = StoreSettings(batch_per_tenant=batch)
    # "w1" starts its first turn on tenant-a (its offset among two tenants is 0).
    return IngestionWorker(
        repository, worker_id="w1", clock=clock, settings_for=lambda _t: settings
    )


async def _states(repository: InMemoryDocumentRepository) -> dict[str, tuple[str, int]]:
    return {
        d.title: (d.state.value, d.attempts)
        for tenant in TENANTS
        for d in await repository.list(tenant)
    }


async def test_a_stop_during_an_extraction_finishes_that_document_and_claims_no_other(
    stop: asyncio.Event, stop_during_first: _StopDuring
) -> None:
    """The attack: a batch of 1,000 and five documents queued per tenant, a stop asked for
    during the first extraction. That document is Indexed at attempt 1; nothing else was
    claimed (every other document is Pending at attempt 0, none Processing), tenant-b's turn
    never started, and the report says the turn stopped — not that the bound was reached or
    the queue drained."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, 5)
    async with asyncio.timeout(HANG_GUARD_S):
        turns = await _worker(repository, clock).run_turn(stop=stop)
    assert turns == [TenantTurn(tenant_id="tenant-a", claimed=1, indexed=1, stopped=True)]
    states = await _states(repository)
    assert states.pop("a-0.md") == ("indexed", 1)
    assert set(states.values()) == {("pending", 0)}
    assert stop_during_first.extracted == ["a-0.md"]


async def test_the_loop_ends_after_the_document_in_hand(
    stop: asyncio.Event, stop_during_first: _StopDuring
) -> None:
    """Through ``run_turns``, as ``esra worker`` runs it: one turn, one document, and the
    loop returns without another turn."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, 3)
    worker = _worker(repository, clock)
    totals = TurnTotals()
    async with asyncio.timeout(HANG_GUARD_S):
        await run_turns(
            lambda: worker.run_turn(stop=stop),
            totals,
            stop=stop,
            until_idle=False,
            idle_wait_s=3600,
        )
    assert (totals.turns, totals.claimed, totals.indexed) == (1, 1, 1)
    assert "processing" not in {state for state, _ in (await _states(repository)).values()}


async def test_a_stop_after_a_full_batch_is_reported_on_the_tenant_it_kept_waiting(
    stop: asyncio.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked for during the last document of tenant-a's batch: tenant-a reached its bound,
    and tenant-b, whose turn the stop prevented, is reported stopped with nothing claimed.
    Tenant-b was not served, so the worker's next turn starts on it."""
    monkeypatch.setattr(ingestion, "extract", _StopDuring(stop, "a-1.md").wrap(extraction.extract))
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, 3)
    worker = _worker(repository, clock, batch=2)
    turns = await worker.run_turn(stop=stop)
    assert turns == [
        TenantTurn(tenant_id="tenant-a", claimed=2, indexed=2, bound_reached=True),
        TenantTurn(tenant_id="tenant-b", stopped=True),
    ]
    states = await _states(repository)
    assert (states["a-2.md"], states["b-0.md"]) == (("pending", 0), ("pending", 0))
    assert [turn.tenant_id for turn in await worker.run_turn()] == ["tenant-b", "tenant-a"]


async def test_a_turn_asked_to_stop_before_it_starts_does_nothing(stop: asyncio.Event) -> None:
    """Already stopped: nothing is listed, swept or claimed."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, 2)
    stop.set()
    assert await _worker(repository, clock).run_turn(stop=stop) == []
    assert set((await _states(repository)).values()) == {("pending", 0)}


async def test_without_a_stop_event_a_turn_drains_every_batch() -> None:
    """``run_turn()`` as before: no event, every tenant's batch."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, 2)
    turns = await _worker(repository, clock).run_turn()
    assert sorted((t.tenant_id, t.indexed, t.stopped) for t in turns) == [
        ("tenant-a", 2, False),
        ("tenant-b", 2, False),
    ]


async def test_a_document_that_fails_while_stopping_is_failed_not_left_processing(
    stop: asyncio.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop arrives while the document in hand fails to extract: its failure (a retry,
    back to Pending) is written before the turn ends; it is never left Processing."""

    def failing(upload: AcceptedUpload, **kwargs: Any) -> Any:
        loop.call_soon_threadsafe(stop.set)
        raise SandboxUnavailableError(
            DocumentRefusal.MALFORMED_DOCUMENT, detail="the sandbox server died"
        )

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(ingestion, "extract", failing)
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, 2)
    turns = await _worker(repository, clock).run_turn(stop=stop)
    assert turns == [TenantTurn(tenant_id="tenant-a", claimed=1, retried=1, stopped=True)]
    states = await _states(repository)
    assert states["a-0.md"] == ("pending", 1)
    assert states["a-1.md"] == ("pending", 0)
