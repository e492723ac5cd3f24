"""Two ``esra worker`` processes on one SQLite store: per-document leases, renewed while the
document is extracted (issue 13, item 3).

A document whose extraction is held by the test (``tests._gated_extraction``) stands in for a
PDF slower than its lease. Leases are short (2 s, renewed every 0.5 s) and the hold outlasts
several of them; nothing here asserts how long anything took.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from esra.starlette._cli import main
from tests._gated_extraction import (
    HANG_GUARD_S,
    SLOW,
    extracted_by,
    extractions,
    gated_command,
    queue_markdown,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEASE_S = 2.0
HEARTBEAT_S = 0.5
_STOPPED = re.compile(
    r"worker (\S+) stopped: indexed (\d+), quarantined (\d+), failed (\d+), retried (\d+), "
    r"lost (\d+)"
)


class _Store:
    """The embedded default's store in ``data_dir``, and the processes working on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.data_dir = tmp_path / "home"
        self.data_dir.mkdir()
        self.database = self.data_dir / "document-store.db"
        self.log = tmp_path / "extractions.log"
        self.processes: list[subprocess.Popen[str]] = []

    def queue(self, *names: str) -> None:
        """Upload ``names`` in order (each strictly older than the next) as Pending."""
        queue_markdown(self.database, *names)

    def worker(self, worker_id: str, release: Path, *extra: str) -> subprocess.Popen[str]:
        args = [
            "worker",
            "--data-dir",
            str(self.data_dir),
            "--worker-id",
            worker_id,
            "--lease",
            str(LEASE_S),
            "--heartbeat",
            str(HEARTBEAT_S),
            "--interval",
            "0.1",
            *extra,
        ]
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and entry point
            gated_command(release, self.log, "esra.starlette._cli:main", args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        return process

    def rows(self) -> dict[str, tuple[str, int, str | None, str | None]]:
        """Per title: state, attempts, lease owner and lease deadline."""
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as connection:
            rows = connection.execute(
                "SELECT title, state, attempts, worker_id, lease_until FROM store_documents"
            ).fetchall()
        return {
            title: (state, attempts, owner, lease) for title, state, attempts, owner, lease in rows
        }

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=HANG_GUARD_S)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[_Store]:
    """An embedded store; every worker process started on it is killed at the end."""
    opened = _Store(tmp_path)
    yield opened
    opened.close()


def _stopped(process: subprocess.Popen[str]) -> dict[str, int]:
    """Wait for the process and read its closing tally."""
    _out, err = process.communicate(timeout=HANG_GUARD_S)
    assert process.returncode == 0, err
    match = _STOPPED.search(err)
    assert match is not None, err
    names = ("indexed", "quarantined", "failed", "retried", "lost")
    return dict(zip(names, (int(n) for n in match.groups()[1:]), strict=True))


def _lease(value: str | None) -> datetime:
    assert value is not None
    return datetime.fromisoformat(value)


def test_a_slow_document_is_renewed_and_never_costs_its_neighbours_an_attempt(
    store: _Store, tmp_path: Path
) -> None:
    """The attack: A starts on a slow file with five tiny ones queued behind it. A holds only
    the slow one and keeps renewing its lease; B takes the five at their first attempt, and
    keeps polling long after the slow one's first lease would have lapsed without ever
    re-taking it. Every document is extracted exactly once, at attempt 1; nothing is lost."""
    tiny = [f"tiny-{n}.md" for n in range(5)]
    store.queue(SLOW, *tiny)
    release = tmp_path / "release"
    holder = store.worker("A", release, "--once")
    wait_until(lambda: store.rows()[SLOW][:3] == ("processing", 1, "A"), "A to hold the slow one")
    first_lease = _lease(store.rows()[SLOW][3])
    rows = store.rows()
    assert {rows[name][:2] for name in tiny} == {("pending", 0)}
    helper = store.worker("B", release)
    wait_until(
        lambda: all(store.rows()[name][0] == "indexed" for name in tiny), "B to index the five"
    )
    # Renewals moved the lease two leases past the first one: by then the first lease had
    # lapsed long ago, while B polled for work every 0.1 s.
    wait_until(
        lambda: _lease(store.rows()[SLOW][3]) > first_lease + timedelta(seconds=2 * LEASE_S),
        "A's renewals to carry the lease past two lease lengths",
    )
    assert store.rows()[SLOW][:3] == ("processing", 1, "A")
    release.touch()
    assert _stopped(holder) == {
        "indexed": 1,
        "quarantined": 0,
        "failed": 0,
        "retried": 0,
        "lost": 0,
    }
    helper.send_signal(signal.SIGTERM)
    tally = _stopped(helper)
    assert (tally["indexed"], tally["lost"], tally["retried"]) == (5, 0, 0)
    assert {row[:3] for row in store.rows().values()} == {("indexed", 1, None)}
    assert extractions(store.log) == dict.fromkeys([SLOW, *tiny], 1)
    assert extracted_by(store.log, SLOW) == [holder.pid]


def test_a_worker_killed_mid_extraction_hands_its_document_over_at_attempt_2(
    store: _Store, tmp_path: Path
) -> None:
    """SIGKILL while A extracts the slow file: its renewals stop, the lease lapses, and B takes
    the document at attempt 2. The tiny files B indexed meanwhile kept attempt 1."""
    tiny = [f"tiny-{n}.md" for n in range(3)]
    store.queue(SLOW, *tiny)
    never = tmp_path / "never-released"
    doomed = store.worker("A", never, "--once")
    wait_until(lambda: store.rows()[SLOW][:3] == ("processing", 1, "A"), "A to hold the slow one")
    open_gate = tmp_path / "released"
    open_gate.touch()
    survivor = store.worker("B", open_gate)
    wait_until(
        lambda: all(store.rows()[name][0] == "indexed" for name in tiny), "B to index the rest"
    )
    doomed.send_signal(signal.SIGKILL)
    doomed.communicate(timeout=HANG_GUARD_S)
    assert doomed.returncode == -signal.SIGKILL
    wait_until(lambda: store.rows()[SLOW][0] == "indexed", "B to take the slow one over")
    survivor.send_signal(signal.SIGTERM)
    tally = _stopped(survivor)
    assert (tally["indexed"], tally["lost"], tally["failed"]) == (4, 0, 0)
    rows = store.rows()
    assert rows[SLOW][:2] == ("indexed", 2)
    assert {rows[name][:2] for name in tiny} == {("indexed", 1)}
    assert extracted_by(store.log, SLOW) == [doomed.pid, survivor.pid]
    assert extractions(store.log) == {SLOW: 2, **dict.fromkeys(tiny, 1)}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lease", "2", "--heartbeat", "2"], "--heartbeat must be above 0 and below --lease"),
        (["--heartbeat", "60"], "--heartbeat must be above 0 and below --lease (60)"),
        (["--lease", "0"], "--lease: must be a number of seconds above 0"),
    ],
)
def test_a_heartbeat_that_does_not_fit_in_the_lease_is_a_usage_error(
    flags: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A renewal interval at or above the lease could never keep a document: refused, exit 2,
    before any store is touched."""
    try:
        code: int | str | None = main(["worker", "--data-dir", str(tmp_path / "home"), *flags])
    except SystemExit as exited:  # argparse's own usage errors
        code = exited.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "home").exists()
