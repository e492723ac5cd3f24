"""A lease lost mid-extraction kills the sandbox child reading the document.

The worker abandoned the extraction (``LeaseHeartbeat.unless_lost``), but its thread went on
waiting on the sandbox, and the child parsing the PDF went on using its CPU and memory up to
its limits while the worker that reclaimed the document extracted it again. Abandoning the
extraction now cancels it: the child (and all it started) is killed, the kill is neither
retried nor counted as the document's failure, and no other document's child is touched.

The servers here are the real ones, forked children and all; only their PDF reader is
wrapped so that a document marked ``hold-<label>`` records its child's pid and holds until
the test releases it (a slow parse the test controls). Their limits are far above the
tests' hang guard: a child still alive at the guard was not ended by any limit of ours.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from esra.core._docstore import extraction, ingestion
from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.ingestion import IngestionWorker, upload_files
from esra.core._docstore.model import Claim, StoreSettings
from esra.core._docstore.sandbox import (
    CancelToken,
    ExtractionCancelledError,
    SandboxLimits,
)
from esra.core._docstore.upload import AcceptedUpload
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository
from tests.core.docstore._scripted_sandbox import ScriptedSandbox

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the children are looked up in /proc"
)

TENANT = "tenant-a"
HANG_GUARD_S = 30  # a guard against a hang, never an assertion about speed
LEASE_S = 10
# Far above the hang guard: no limit of ours ends a held child while a test waits on it.
UNBOUNDED = SandboxLimits(cpu_seconds=3600, wall_seconds=3600.0)

_SERVER = textwrap.dedent(
    """
    import os, re, sys, time
    from pathlib import Path
    from esra.core._docstore import _sandbox_server

    directory = Path(sys.argv[1])
    HOLD_LIMIT_S = 300
    readers, missing = _sandbox_server._readers()
    real_pdf = readers["pdf"]

    def record(name, pid):
        (directory / f"{name}.tmp").write_text(str(pid))
        (directory / f"{name}.tmp").rename(directory / f"{name}.pid")

    def hold(label):
        held_until = time.monotonic() + HOLD_LIMIT_S
        while not (directory / f"{label}.release").exists():
            if time.monotonic() > held_until:  # a test that never released it
                os._exit(1)
            time.sleep(0.01)

    def held_pdf(data, chars, options):
        marked = re.search(rb"hold-([a-z]+)", data)
        if marked:
            label = marked.group(1).decode()
            if b"with-grandchild" in data and os.fork() == 0:
                os.setsid()  # out of the child's process group and session
                record(f"{label}-grandchild", os.getpid())
                hold(label)
                os._exit(0)
            record(label, os.getpid())
            hold(label)
        return real_pdf(data, chars, options)

    readers["pdf"] = held_pdf
    _sandbox_server._readers = lambda: (readers, missing)
    # Its children record their pids in files and fork: the system-call filter and the file
    # restriction refuse both, so these servers' children run without them (the subreaper
    # and the cancellation are what these tests are about; the filter is tested in
    # test_sandbox_containment_syscalls, the restriction in test_sandbox_containment_files).
    _sandbox_server._seccomp.confine = lambda: False
    _sandbox_server._landlock.confine = lambda ruleset: False
    _sandbox_server.main()
    """
)


class _HoldingSandbox(ScriptedSandbox):
    """Real sandbox servers whose PDF reader holds the documents marked ``hold-<label>``."""

    def __init__(self, directory: Path) -> None:
        super().__init__(_SERVER, str(directory), max_servers=3)  # a tenant may hold two
        self.directory = directory
        self.waiting = threading.Event()  # a request found it must wait for a server

    def _must_wait(self, holder: str | None) -> bool:
        must = super()._must_wait(holder)
        if must:
            self.waiting.set()
        return must

    def release(self, label: str) -> None:
        (self.directory / f"{label}.release").touch()

    async def held_child(self, label: str) -> int:
        """The pid of the child holding the document marked ``hold-<label>``, once held
        (``<label>-grandchild``: the process that child forked into a session of its own)."""
        pid = self.directory / f"{label}.pid"
        await _until(pid.exists)
        return int(pid.read_text())

    def started(self, label: str) -> bool:
        """Whether a child was ever started for the document marked ``hold-<label>``."""
        return (self.directory / f"{label}.pid").exists()

    async def read(
        self, text: str, *, holder: str | None = None, cancel: CancelToken | None = None
    ) -> dict[str, object]:
        """This sandbox's answer for a one-page PDF of ``text``, read in a thread."""
        return await asyncio.to_thread(
            self.extract,
            text_pdf([text]),
            UNBOUNDED,
            reader=DocumentFormat.PDF,
            holder=holder,
            cancel=cancel,
        )


@pytest.fixture
async def holding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[_HoldingSandbox]:
    """Async, so that its release comes before the loop waits for the extraction threads."""
    with _HoldingSandbox(tmp_path) as held:
        monkeypatch.setattr(extraction, "default_sandbox", lambda: held)
        try:
            yield held
        finally:
            # Whatever a failing test left held ends, so that its thread and server end too.
            for pid in tmp_path.glob("*.pid"):
                held.release(pid.stem.removesuffix("-grandchild"))


class _ThreadEnds:
    """How each extraction thread ended, by document title (its exception, or None)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.ended: dict[str, BaseException | None] = {}
        self._real = real

    def __call__(self, upload: AcceptedUpload, *args: Any) -> Any:
        try:
            result = self._real(upload, *args)
        except BaseException as exc:
            self.ended[upload.display_name] = exc
            raise
        self.ended[upload.display_name] = None
        return result


class _StallingRepository(InMemoryDocumentRepository):
    """The renewals of ``stalled_worker``'s claims wait while ``stall()`` is in force, as a
    worker's do when its process stalls past its lease."""

    def __init__(self, stalled_worker: str) -> None:
        super().__init__()
        self._stalled_worker = stalled_worker
        self._running = asyncio.Event()
        self._running.set()
        self.stalled = asyncio.Event()

    def stall(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        if claim.worker_id == self._stalled_worker and not self._running.is_set():
            self.stalled.set()
            await self._running.wait()
        return await super().heartbeat(claim, lease_s=lease_s, now=now)


def _worker(
    repository: InMemoryDocumentRepository, clock: FakeClock, worker_id: str, lease_s: float
) -> IngestionWorker:
    settings = StoreSettings(lease_s=lease_s, heartbeat_s=0.01)
    return IngestionWorker(
        repository,
        worker_id=worker_id,
        clock=clock,
        settings_for=lambda _: settings,
        sandbox_limits=UNBOUNDED,
    )


async def _queue(repository: InMemoryDocumentRepository, clock: FakeClock, *texts: str) -> None:
    for text in texts:  # one at a time, each older than the next: claimed in this order
        (outcome,) = await upload_files(
            repository, TENANT, [(f"{text}.pdf", text_pdf([text]))], scope="all", clock=clock
        )
        assert outcome.document is not None
        clock.advance(1)


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD_S):
        while not condition():
            await asyncio.sleep(0.005)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False


async def _lose_lease_of(repository: _StallingRepository, clock: FakeClock, title: str) -> None:
    """Stall the renewals past the lease, let worker B reclaim ``title``, and resume."""
    repository.stall()
    await _until(repository.stalled.is_set)
    clock.advance(LEASE_S + 1)
    (reclaimed,) = await repository.claim(
        TENANT, worker_id="B", limit=1, lease_s=LEASE_S, max_attempts=3, now=clock.now()
    )
    assert (reclaimed.title, reclaimed.attempt) == (title, 2)
    repository.resume()


async def _states(repository: InMemoryDocumentRepository) -> dict[str, tuple[str, int]]:
    return {d.title: (d.state.value, d.attempts) for d in await repository.list(TENANT)}


async def test_a_lost_lease_kills_the_documents_sandbox_child(
    holding: _HoldingSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's child is holding the slow PDF when B reclaims it: A's next renewal learns it, the
    child is killed (not left to its hour-long limits), the abandoned thread ends as
    cancelled, nothing is written or counted against the document, and A indexes its next
    PDF through the sandbox."""
    threads = _ThreadEnds(ingestion._extract)
    monkeypatch.setattr(ingestion, "_extract", threads)
    repository, clock = _StallingRepository("A"), FakeClock()
    await _queue(repository, clock, "hold-slow", "next")
    turn = asyncio.create_task(_worker(repository, clock, "A", LEASE_S).run_turn())
    child = await holding.held_child("slow")
    assert _alive(child)
    await _lose_lease_of(repository, clock, "hold-slow.pdf")
    await _until(lambda: not _alive(child))
    await _until(lambda: "hold-slow.pdf" in threads.ended)
    assert isinstance(threads.ended["hold-slow.pdf"], ExtractionCancelledError)
    async with asyncio.timeout(HANG_GUARD_S):
        (result,) = await turn
    assert (result.claimed, result.indexed, result.lost, result.failed, result.retried) == (
        2,
        1,
        1,
        0,
        0,
    )
    (slow,) = [d for d in await repository.list(TENANT) if d.title == "hold-slow.pdf"]
    assert (slow.state.value, slow.attempts, slow.failure) == ("processing", 2, None)
    assert (await _states(repository))["next.pdf"] == ("indexed", 1)


async def test_a_lost_lease_leaves_another_documents_child_running(
    holding: _HoldingSandbox,
) -> None:
    """Worker C of the same process extracts another PDF in the same sandbox meanwhile: A's
    loss kills A's child only; C's, released afterwards, is indexed by C."""
    repository, clock = _StallingRepository("A"), FakeClock()
    await _queue(repository, clock, "hold-slow", "hold-other")
    first = asyncio.create_task(_worker(repository, clock, "A", LEASE_S).run_turn())
    slow_child = await holding.held_child("slow")
    # C's lease outlasts the clock's advance: only A's claim is taken away.
    second = asyncio.create_task(_worker(repository, clock, "C", 100 * LEASE_S).run_turn())
    other_child = await holding.held_child("other")
    await _lose_lease_of(repository, clock, "hold-slow.pdf")
    await _until(lambda: not _alive(slow_child))
    async with asyncio.timeout(HANG_GUARD_S):
        (lost,) = await first
    assert (lost.claimed, lost.lost, lost.indexed, lost.failed, lost.retried) == (1, 1, 0, 0, 0)
    assert _alive(other_child)
    holding.release("other")
    async with asyncio.timeout(HANG_GUARD_S):
        (indexed,) = await second
    assert (indexed.claimed, indexed.indexed, indexed.lost) == (1, 1, 0)
    assert (await _states(repository))["hold-other.pdf"] == ("indexed", 1)


# The sandbox's side of it: a request cancelled through its token.


async def test_a_cancelled_request_ends_all_its_child_started(holding: _HoldingSandbox) -> None:
    """The child forked a process into a session of its own (out of its process group):
    cancelling the request ends both, the request ends as cancelled, not as the document's
    refusal, and the sandbox serves the next request."""
    cancel = CancelToken()
    request = asyncio.create_task(holding.read("hold-family with-grandchild", cancel=cancel))
    child = await holding.held_child("family")
    grandchild = await holding.held_child("family-grandchild")
    assert _alive(child)
    assert _alive(grandchild)
    cancel.cancel()
    with pytest.raises(ExtractionCancelledError):
        async with asyncio.timeout(HANG_GUARD_S):
            await request
    # Ended and reaped before the server answered the cancellation.
    assert not _alive(child)
    assert not _alive(grandchild)
    assert (await holding.read("plain"))["pages"] == ["plain"]


async def test_a_request_cancelled_while_waiting_for_a_server_stops_waiting(
    holding: _HoldingSandbox,
) -> None:
    """The tenant holds all the servers it may be lent: its third request waits, and,
    cancelled, stops waiting — it never starts a child — while the two held go on."""
    first = asyncio.create_task(holding.read("hold-first", holder=TENANT))
    second = asyncio.create_task(holding.read("hold-second", holder=TENANT))
    held = [await holding.held_child("first"), await holding.held_child("second")]
    cancel = CancelToken()
    waiting = asyncio.create_task(holding.read("hold-third", holder=TENANT, cancel=cancel))
    await _until(holding.waiting.is_set)
    cancel.cancel()
    with pytest.raises(ExtractionCancelledError):
        async with asyncio.timeout(HANG_GUARD_S):
            await waiting
    assert not holding.started("third")
    assert all(_alive(pid) for pid in held)
    holding.release("first")
    holding.release("second")
    async with asyncio.timeout(HANG_GUARD_S):
        answers = [await first, await second]
    assert [answer["pages"] for answer in answers] == [["hold-first"], ["hold-second"]]
