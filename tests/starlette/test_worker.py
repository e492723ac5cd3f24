"""``esra worker``: drains every tenant store, logs each turn's tally, idles until stopped, and
stops cleanly after the document in hand on a stop request or SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import pytest

from esra.core._docstore.ingestion import TenantTurn, upload_files
from esra.core._docstore.model import Claim, DocumentState, IndexedContent, StoreSettings
from esra.core.testing import FakeClock
from esra.sqlite import SqliteDocumentRepository
from esra.starlette._cli import main
from esra.starlette._worker import (
    describe_turn,
    run_worker,
    stop_on_signals,
)

# A generous guard against a hang, never an assertion about speed.
HANG_GUARD_S = 60


def _memo(number: int) -> tuple[str, bytes]:
    text = f"# Memo {number}\n\nThe workshop stocks {number * 3} quokka-brand chain tools.\n"
    return f"memo-{number}.md", text.encode()


async def _queue(path: Path, tenant: str, numbers: range) -> None:
    """Upload memos into the store at ``path`` as pending documents."""
    repository = SqliteDocumentRepository(path)
    try:
        await repository.initialize()
        outcomes = await upload_files(
            repository, tenant, [_memo(n) for n in numbers], scope="general", clock=FakeClock()
        )
        assert all(o.document is not None for o in outcomes)
    finally:
        await repository.close()


async def _states(path: Path, tenant: str) -> list[DocumentState]:
    repository = SqliteDocumentRepository(path)
    try:
        return [d.state for d in await repository.list(tenant)]
    finally:
        await repository.close()


async def test_once_drains_every_store_and_logs_each_turn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two tenants in two store files: a small batch bound takes several turns, each logged
    with its tally and the bound; --once returns when nothing is left."""
    acme, globex = tmp_path / "acme.db", tmp_path / "globex.db"
    await _queue(acme, "acme", range(5))
    await _queue(globex, "globex", range(2))
    caplog.set_level(logging.INFO, logger="esra.starlette._worker")
    report = await run_worker(
        {"acme": acme, "globex": globex},
        stop=asyncio.Event(),
        worker_id="w-test",
        clock=FakeClock(),
        once=True,
        settings_for=lambda _tenant: StoreSettings(batch_per_tenant=2),
    )
    assert (report.claimed, report.indexed, report.failed, report.lost) == (7, 7, 0, 0)
    assert not report.unreachable
    assert await _states(acme, "acme") == [DocumentState.INDEXED] * 5
    assert await _states(globex, "globex") == [DocumentState.INDEXED] * 2
    lines = [r.getMessage() for r in caplog.records]
    assert (
        "tenant acme: claimed 2, indexed 2, quarantined 0, failed 0, retried 0, lost 0; "
        "batch bound reached, more queued"
    ) in lines
    assert "tenant acme: claimed 1, indexed 1, quarantined 0, failed 0, retried 0, lost 0" in lines


async def test_tenants_sharing_a_store_file_share_one_worker(tmp_path: Path) -> None:
    """Two tenants pointing at one database: it is opened once and both queues drain."""
    shared = tmp_path / "store.db"
    await _queue(shared, "acme", range(2))
    await _queue(shared, "globex", range(10, 11))
    report = await run_worker(
        {"acme": shared, "globex": tmp_path / "." / "store.db"},
        stop=asyncio.Event(),
        worker_id="w-test",
        clock=FakeClock(),
        once=True,
    )
    assert report.indexed == 3


async def test_an_idle_worker_picks_up_new_work_and_stops_when_asked(tmp_path: Path) -> None:
    """Without --once the worker waits for work, indexes what arrives, and returns on stop."""
    store = tmp_path / "store.db"
    await _queue(store, "acme", range(0))
    stop = asyncio.Event()
    running = asyncio.create_task(
        run_worker({"acme": store}, stop=stop, worker_id="w-test", interval_s=0.05)
    )
    await _queue(store, "acme", range(3))
    async with asyncio.timeout(HANG_GUARD_S):
        while await _states(store, "acme") != [DocumentState.INDEXED] * 3:
            await asyncio.sleep(0.05)
        assert not running.done()
        stop.set()
        report = await running
    assert report.indexed == 3


async def test_a_stop_during_a_turn_ends_it_after_the_document_in_hand(tmp_path: Path) -> None:
    """A stop requested while the first document is handled ends the run once that document
    is indexed: with a batch of 1,000, the other three stay Pending, unclaimed."""
    store = tmp_path / "store.db"
    await _queue(store, "acme", range(4))
    stop = asyncio.Event()

    async def stop_after_indexing(_claim: Claim, _content: IndexedContent) -> None:
        stop.set()  # asked to stop while the first document is still in hand

    report = await run_worker(
        {"acme": store},
        stop=stop,
        worker_id="w-test",
        settings_for=lambda _tenant: StoreSettings(batch_per_tenant=1000),
        on_indexed=stop_after_indexing,
    )
    assert (report.turns, report.claimed, report.indexed) == (1, 1, 1)
    states = await _states(store, "acme")
    assert sorted(states) == sorted([DocumentState.INDEXED] + [DocumentState.PENDING] * 3)


async def test_a_stop_before_the_first_claim_claims_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked to stop as the tenant's turn starts: nothing is claimed, and the log says the
    stop ended the turn (not that the queue drained)."""
    store = tmp_path / "store.db"
    await _queue(store, "acme", range(2))
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="esra.starlette._worker")

    def settings_then_stop(_tenant: str) -> StoreSettings:
        stop.set()
        return StoreSettings(batch_per_tenant=2)

    report = await run_worker(
        {"acme": store}, stop=stop, worker_id="w-test", settings_for=settings_then_stop
    )
    assert (report.turns, report.claimed) == (1, 0)
    assert await _states(store, "acme") == [DocumentState.PENDING] * 2
    assert (
        "tenant acme: claimed 0, indexed 0, quarantined 0, failed 0, retried 0, lost 0; "
        "stop requested, the rest stays queued"
    ) in [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_sigint_and_sigterm_request_a_clean_stop(signum: signal.Signals) -> None:
    """The first signal sets the stop event and restores the default handlers."""
    stop = asyncio.Event()
    stop_on_signals(stop)
    os.kill(os.getpid(), signum)
    async with asyncio.timeout(HANG_GUARD_S):
        await stop.wait()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


async def test_a_store_that_is_not_initialised_is_skipped_until_it_is(tmp_path: Path) -> None:
    """A database without the store schema (or not a database at all) is never initialised
    by the worker: it is reported, and the other stores are served."""
    bad = tmp_path / "store.db"
    bad.write_bytes(b"this is not an SQLite database, only quokka notes" * 40)
    report = await run_worker(
        {"acme": bad, "fresh": tmp_path / "absent.db"},
        stop=asyncio.Event(),
        worker_id="w-test",
        once=True,
    )
    assert report.uninitialised == {bad.resolve(), (tmp_path / "absent.db").resolve()}
    assert not (tmp_path / "absent.db").exists()


def test_describe_turn_reports_an_unreachable_store() -> None:
    """The log line says when a tenant's turn ended because its store went away."""
    line = describe_turn(TenantTurn(tenant_id="acme", unreachable=True))
    assert line.endswith("lost 0; store unreachable, turn ended")


def test_the_cli_drains_the_embedded_store_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``esra worker --once --data-dir`` indexes what ``esra ingest --no-index`` queued."""
    memo = tmp_path / "memo.md"
    memo.write_text("# Chain wear\n\nReplace the chain when it has stretched half a percent.\n")
    data_dir = tmp_path / "home"
    assert main(["ingest", "--data-dir", str(data_dir), "--no-index", str(memo)]) == 0
    assert main(["worker", "--data-dir", str(data_dir), "--once", "--worker-id", "cli"]) == 0
    assert main(["ingest", "--data-dir", str(data_dir), "--no-index", str(memo)]) == 1
    capsys.readouterr()
    states = asyncio.run(_states(data_dir / "document-store.db", "larkspur"))
    assert states == [DocumentState.INDEXED]


@pytest.mark.parametrize("interval", ["0", "-1", "soon", "nan", "7200"])
def test_a_bad_interval_is_a_usage_error(interval: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--interval takes seconds above 0 and at most an hour."""
    with pytest.raises(SystemExit) as exited:
        main(["worker", "--interval", interval])
    assert exited.value.code == 2
    assert "--interval: must be a number of seconds" in capsys.readouterr().err


def test_an_unopenable_store_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A drain that could not reach a store names its file and exits 1."""
    (tmp_path / "document-store.db").write_bytes(b"quokka" * 1000)
    assert main(["worker", "--data-dir", str(tmp_path), "--once"]) == 1
    assert "document-store.db" in capsys.readouterr().err
