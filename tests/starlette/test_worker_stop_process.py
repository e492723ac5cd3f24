"""SIGTERM to a real ``esra worker`` process in the middle of a batch: it finishes the document
in hand and exits, leaving the rest Pending — never Processing under a lease.

Before, the worker looked at its stop only between turns, and a turn drains a whole batch of
every tenant (up to 1,000 documents each): ``systemctl stop`` waited for all of them, then
SIGKILLed the process, and the document in hand was recovered only when its lease lapsed.
The first document's extraction is held by the test (``tests._gated_extraction``), so the
signal arrives while it is in hand; nothing here asserts how long anything took.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._gated_extraction import (
    HANG_GUARD_S,
    SLOW,
    extractions,
    gated_command,
    queue_markdown,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_STOPPED = re.compile(
    r"worker A stopped: indexed (\d+), quarantined 0, failed 0, retried 0, lost 0"
)


def _rows(database: Path) -> dict[str, tuple[str, int, str | None]]:
    """Per title: state, attempts and lease owner."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT title, state, attempts, worker_id FROM store_documents"
        ).fetchall()
    return {title: (state, attempts, owner) for title, state, attempts, owner in rows}


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Every process a test starts is killed at its end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=HANG_GUARD_S)


def test_sigterm_mid_batch_finishes_the_document_in_hand_and_claims_no_other(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """Six documents queued, a batch (20) that holds them all; SIGTERM while the first is
    extracted. The worker indexes that one, claims none of the other five and exits 0: they
    are Pending at attempt 0, and nothing is Processing."""
    data_dir = tmp_path / "home"
    data_dir.mkdir()
    database = data_dir / "document-store.db"
    tiny = [f"tiny-{n}.md" for n in range(5)]
    queue_markdown(database, SLOW, *tiny)
    release, log, stderr = tmp_path / "release", tmp_path / "extractions.log", tmp_path / "err"
    args = ["worker", "--data-dir", str(data_dir), "--worker-id", "A", "--interval", "0.1"]
    with stderr.open("w") as err:
        worker = subprocess.Popen(  # noqa: S603 - our own interpreter and entry point
            gated_command(release, log, "esra.starlette._cli:main", args),
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )
    processes.append(worker)
    wait_until(lambda: _rows(database)[SLOW][:3] == ("processing", 1, "A"), "A to hold SLOW")
    worker.send_signal(signal.SIGTERM)
    # The stop is requested while the document is still in hand; only then is it released.
    wait_until(lambda: "SIGTERM received" in stderr.read_text(), "the worker to take the stop")
    release.touch()
    worker.communicate(timeout=HANG_GUARD_S)
    output = stderr.read_text()
    assert worker.returncode == 0, output
    stopped = _STOPPED.search(output)
    assert stopped is not None, output
    assert stopped.group(1) == "1"
    rows = _rows(database)
    assert rows.pop(SLOW) == ("indexed", 1, None)
    assert set(rows.values()) == {("pending", 0, None)}
    assert extractions(log) == {SLOW: 1}
