"""A lease lost mid-extraction abandons the extraction: the worker writes nothing for the
document, counts it ``lost`` and goes on with its next claim; a renewal the store could not
take abandons nothing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from esra.core._docstore import extraction, ingestion, scanner
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.model import Claim, StoreSettings
from esra.core._docstore.upload import AcceptedUpload
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANT = "tenant-a"
HANG_GUARD_S = 60  # a guard against a hang, never an assertion about speed
SLOW = "slow.txt"
NEXT = "next.txt"
LEASE_S = 10


class _Gate:
    """Holds the extraction of ``SLOW`` (in its worker thread) until ``open()``, and records
    what the extraction thread went on to do with it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._open = threading.Event()
        self.finished = threading.Event()  # the thread's whole extraction of SLOW ended
        self.scanned: list[str] = []

    def open(self) -> None:
        self._open.set()

    def hold(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def gated(upload: AcceptedUpload, **kwargs: Any) -> Any:
            if upload.display_name == SLOW:
                self.entered.set()
                assert self._open.wait(HANG_GUARD_S)
            return real(upload, **kwargs)

        return gated

    def watch(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def watched(upload: AcceptedUpload, *args: Any) -> Any:
            try:
                return real(upload, *args)
            finally:
                if upload.display_name == SLOW:
                    self.finished.set()

        return watched

    def record(self, real: Callable[[str], Any]) -> Callable[[str], Any]:
        def recorded(text: str) -> Any:
            self.scanned.append(text)
            return real(text)

        return recorded


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Gate]:
    held = _Gate()
    monkeypatch.setattr(ingestion, "extract", held.hold(extraction.extract))
    monkeypatch.setattr(ingestion, "_extract", held.watch(ingestion._extract))
    monkeypatch.setattr(ingestion, "scan_text", held.record(scanner.scan_text))
    yield held
    held.open()


class _StallingRepository(InMemoryDocumentRepository):
    """Renewals can be stalled (``stall()``) until ``resume()``, as a worker's are when its
    process stalls; and made to fail ``failures`` times, as when the store is briefly away."""

    def __init__(self) -> None:
        super().__init__()
        self._running = asyncio.Event()
        self._running.set()
        self.stalled = asyncio.Event()
        self.failures = 0
        self.renewals = 0

    def stall(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        if not self._running.is_set():
            self.stalled.set()
            await self._running.wait()
        if self.failures:
            self.failures -= 1
            msg = "store briefly unreachable"
            raise ConnectionError(msg)
        owned = await super().heartbeat(claim, lease_s=lease_s, now=now)
        self.renewals += owned
        return owned


def _worker(repository: InMemoryDocumentRepository, clock: FakeClock) -> IngestionWorker:
    settings = StoreSettings(lease_s=LEASE_S, heartbeat_s=0.01)
    return IngestionWorker(repository, worker_id="A", clock=clock, settings_for=lambda _: settings)


async def _queue(repository: InMemoryDocumentRepository, clock: FakeClock, *names: str) -> None:
    for name in names:  # one at a time, each older than the next: claimed in this order
        body = f"{name}\n\nThe quokka ledger of {name}.\n".encode()
        (outcome,) = await upload_files(
            repository, TENANT, [(name, body)], scope="all", clock=clock
        )
        assert outcome.document is not None
        clock.advance(1)


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD_S):
        while not condition():
            await asyncio.sleep(0.005)


async def _documents(repository: InMemoryDocumentRepository) -> dict[str, tuple[str, int]]:
    return {d.title: (d.state.value, d.attempts) for d in await repository.list(TENANT)}


async def test_a_lease_taken_away_mid_extraction_abandons_it(gate: _Gate) -> None:
    """A stalls past its lease, B reclaims the slow document, and A's next renewal learns it:
    A's turn moves on while the extraction is still held (it was abandoned, not waited for),
    writes nothing for the document, counts it lost and indexes the next one; the abandoned
    thread never goes on to scan the text it extracted."""
    repository, clock = _StallingRepository(), FakeClock()
    await _queue(repository, clock, SLOW, NEXT)
    turn = asyncio.create_task(_worker(repository, clock).run_turn())
    await _until(gate.entered.is_set)
    repository.stall()
    await _until(repository.stalled.is_set)
    clock.advance(LEASE_S + 1)
    (reclaimed,) = await repository.claim(
        TENANT, worker_id="B", limit=1, lease_s=LEASE_S, max_attempts=3, now=clock.now()
    )
    assert (reclaimed.title, reclaimed.attempt) == (SLOW, 2)
    repository.resume()
    async with asyncio.timeout(HANG_GUARD_S):
        (result,) = await turn
    assert not gate.finished.is_set()  # the extraction is still held: A did not wait for it
    assert (result.claimed, result.indexed, result.lost, result.failed, result.retried) == (
        2,
        1,
        1,
        0,
        0,
    )
    (slow,) = [d for d in await repository.list(TENANT) if d.title == SLOW]
    assert (slow.state.value, slow.attempts, slow.segment_count, slow.failure) == (
        "processing",
        2,
        0,
        None,
    )
    assert (await _documents(repository))[NEXT] == ("indexed", 1)
    gate.open()
    await asyncio.to_thread(gate.finished.wait, HANG_GUARD_S)
    assert gate.finished.is_set()
    assert not any("quokka ledger of slow" in text for text in gate.scanned)


async def test_a_renewal_the_store_could_not_take_abandons_nothing(gate: _Gate) -> None:
    """Renewals that fail while the store is briefly away are retried; the extraction runs
    to its end and the document is indexed by its claim."""
    repository, clock = _StallingRepository(), FakeClock()
    await _queue(repository, clock, SLOW)
    repository.failures = 3
    turn = asyncio.create_task(_worker(repository, clock).run_turn())
    await _until(gate.entered.is_set)
    await _until(lambda: repository.failures == 0 and repository.renewals >= 1)
    gate.open()
    async with asyncio.timeout(HANG_GUARD_S):
        (result,) = await turn
    assert (result.claimed, result.indexed, result.lost) == (1, 1, 0)
    assert await _documents(repository) == {SLOW: ("indexed", 1)}
    assert any("quokka ledger of slow" in text for text in gate.scanned)
