"""Per-document leases: a worker claims only the document it starts, renews that lease while
extracting it, and a slow document never costs another one an attempt (issue 13, item 3)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from esra.core._docstore import extraction, ingestion
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.heartbeat import LeaseHeartbeat
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.model import Claim, StoreSettings
from esra.core._docstore.upload import AcceptedUpload
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANT = "tenant-a"
HANG_GUARD_S = 60  # a guard against a hang, never an assertion about speed
SLOW = "slow.txt"


class _Gate:
    """Holds the extraction of ``SLOW`` (in its worker thread) until ``open()``."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self._open = threading.Event()
        self.extracted: list[str] = []

    def open(self) -> None:
        self._open.set()

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def gated(upload: AcceptedUpload, **kwargs: Any) -> Any:
            self.extracted.append(upload.display_name)
            if upload.display_name == SLOW:
                self.entered.set()
                assert self._open.wait(HANG_GUARD_S)
            return real(upload, **kwargs)

        return gated


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Gate]:
    """Extraction of ``SLOW`` blocks until the test opens the gate (opened at teardown)."""
    held = _Gate()
    monkeypatch.setattr(ingestion, "extract", held.wrap(extraction.extract))
    yield held
    held.open()


class _CountingRepository(InMemoryDocumentRepository):
    """Counts the renewals the store took, per document."""

    def __init__(self) -> None:
        super().__init__()
        self.renewals: dict[str, int] = {}

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        owned = await super().heartbeat(claim, lease_s=lease_s, now=now)
        if owned:
            self.renewals[claim.document_id] = self.renewals.get(claim.document_id, 0) + 1
        return owned


def _worker(
    repository: InMemoryDocumentRepository, clock: FakeClock, worker_id: str, **settings: Any
) -> IngestionWorker:
    chosen = StoreSettings(**settings)
    return IngestionWorker(
        repository, worker_id=worker_id, clock=clock, settings_for=lambda _t: chosen
    )


async def _queue(repository: InMemoryDocumentRepository, clock: FakeClock, *names: str) -> None:
    files = [(name, f"{name}\n\nThe body of {name}.\n".encode()) for name in names]
    outcomes = await upload_files(repository, TENANT, files, scope="all", clock=clock)
    assert all(o.document is not None for o in outcomes)
    clock.advance(1)


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD_S):
        while not condition():
            await asyncio.sleep(0.005)


async def _documents(repository: InMemoryDocumentRepository) -> dict[str, tuple[str, int]]:
    return {d.title: (d.state.value, d.attempts) for d in await repository.list(TENANT)}


async def test_a_slow_document_holds_only_itself(gate: _Gate) -> None:
    """The attack: worker A starts a slow file with five tiny ones queued behind it. A holds
    only the slow one; B takes the five at their first attempt; nothing is lost."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    tiny = [f"tiny-{n}.txt" for n in range(5)]
    await _queue(repository, clock, SLOW, *tiny)
    first = asyncio.create_task(_worker(repository, clock, "A", lease_s=30).run_turn())
    await _until(gate.entered.is_set)
    documents = await _documents(repository)
    assert documents[SLOW] == ("processing", 1)
    assert {documents[name] for name in tiny} == {("pending", 0)}
    (second,) = await _worker(repository, clock, "B", lease_s=30).run_turn()
    assert (second.claimed, second.indexed, second.lost) == (5, 5, 0)
    gate.open()
    async with asyncio.timeout(HANG_GUARD_S):
        (slow,) = await first
    assert (slow.claimed, slow.indexed, slow.lost) == (1, 1, 0)
    assert set((await _documents(repository)).values()) == {("indexed", 1)}
    assert sorted(gate.extracted) == sorted([SLOW, *tiny])


async def test_the_lease_is_renewed_while_the_document_is_extracted(gate: _Gate) -> None:
    """A renews its lease while extracting: with the clock moved well past the first lease,
    B finds nothing to take, and A indexes the document at attempt 1."""
    repository, clock = _CountingRepository(), FakeClock()
    await _queue(repository, clock, SLOW)
    owner = _worker(repository, clock, "A", lease_s=10, heartbeat_s=0.01)
    first = asyncio.create_task(owner.run_turn())
    await _until(gate.entered.is_set)
    (document,) = await repository.list(TENANT)
    claimed_at = clock.now()
    for _ in range(5):
        renewed = repository.renewals.get(document.id, 0)
        clock.advance(5)  # half a lease: the next renewal counts from here

        def renewed_again(seen: int = renewed) -> bool:
            return repository.renewals.get(document.id, 0) > seen

        await _until(renewed_again)
        assert await _worker(repository, clock, "B", lease_s=10).run_turn() == []
    assert (clock.now() - claimed_at).total_seconds() > 2 * 10  # two leases and more
    gate.open()
    async with asyncio.timeout(HANG_GUARD_S):
        (turn,) = await first
    assert (turn.indexed, turn.lost) == (1, 0)
    assert await _documents(repository) == {SLOW: ("indexed", 1)}


async def test_a_worker_that_lost_its_lease_is_counted_lost(gate: _Gate) -> None:
    """When the lease does lapse (renewals far apart), the other worker takes the document at
    attempt 2 and the first one's result is dropped as lost."""
    repository, clock = InMemoryDocumentRepository(), FakeClock()
    await _queue(repository, clock, SLOW)
    first = asyncio.create_task(
        _worker(repository, clock, "A", lease_s=10, heartbeat_s=9).run_turn()
    )
    await _until(gate.entered.is_set)
    clock.advance(11)
    gate.open()  # B's extraction of the same file goes through the opened gate
    (second,) = await _worker(repository, clock, "B", lease_s=10).run_turn()
    assert (second.claimed, second.indexed) == (1, 1)
    async with asyncio.timeout(HANG_GUARD_S):
        (late,) = await first
    assert (late.claimed, late.indexed, late.lost) == (1, 0, 1)
    assert await _documents(repository) == {SLOW: ("indexed", 2)}


class _ScriptedRepository(InMemoryDocumentRepository):
    """Answers heartbeats from a script: an exception is raised, a bool returned."""

    def __init__(self, script: list[bool | Exception]) -> None:
        super().__init__()
        self.script = script
        self.calls = 0

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        self.calls += 1
        answer = self.script.pop(0) if self.script else True
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_the_heartbeat_retries_a_store_error_and_stops_once_the_claim_is_lost() -> None:
    """A renewal the store could not take is tried again; one that finds the claim lost ends
    the heartbeat, and no renewal follows."""
    repository = _ScriptedRepository([ConnectionError("store away"), True, False])
    claim = Claim(
        document_id="d",
        tenant_id=TENANT,
        worker_id="w",
        attempt=1,
        title="t",
        format=DocumentFormat.TXT,
        data=b"",
        lease_until=FakeClock().now(),
    )
    heartbeat = LeaseHeartbeat(repository, claim, lease_s=1, interval_s=0.001, clock=FakeClock())
    async with heartbeat:
        await _until(lambda: heartbeat.lost)
        calls = repository.calls
        await asyncio.sleep(0.05)
    assert (heartbeat.renewals, heartbeat.lost, calls, repository.calls) == (1, True, 3, 3)


async def test_leaving_the_block_stops_the_heartbeat() -> None:
    """After the block no renewal is made, whatever the interval."""
    repository = _ScriptedRepository([])
    claim = Claim(
        document_id="d",
        tenant_id=TENANT,
        worker_id="w",
        attempt=1,
        title="t",
        format=DocumentFormat.TXT,
        data=b"",
        lease_until=FakeClock().now(),
    )
    async with LeaseHeartbeat(repository, claim, lease_s=1, interval_s=0.001, clock=FakeClock()):
        await _until(lambda: repository.calls >= 2)
    stopped_at = repository.calls
    await asyncio.sleep(0.05)
    assert repository.calls == stopped_at


def test_the_heartbeat_defaults_to_a_third_of_the_lease_and_must_fit_in_it() -> None:
    """The interval is a third of the lease unless set; one not below the lease is refused."""
    assert StoreSettings(lease_s=30).heartbeat_interval_s == 10
    assert StoreSettings(lease_s=2, heartbeat_s=0.5).heartbeat_interval_s == 0.5
    with pytest.raises(ValueError, match="heartbeat_s must be above 0 and below lease_s"):
        StoreSettings(lease_s=2, heartbeat_s=2)
    with pytest.raises(ValueError, match="heartbeat_s"):
        StoreSettings(heartbeat_s=0)
    for bad in (0, -1, float("nan"), 1e9):
        with pytest.raises(ValueError, match="lease_s must be above 0"):
            StoreSettings(lease_s=bad)
