"""Two ingestion worker processes on one PostgreSQL store: per-document leases, renewed while
the document is extracted (issue 13, item 3).

Workers are ``python -m esra.postgres.store_worker`` entry points run with the slow
document's extraction held by the test (``tests._gated_extraction``), standing in for a PDF
slower than its lease. Leases are short (2 s, renewed every 0.5 s) and the hold outlasts
several of them; nothing here asserts how long anything took.
"""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from esra.core._docstore.ingestion import upload_files
from esra.core.testing import FakeClock
from esra.postgres import PostgresDocumentRepository, apply_store_schema
from tests._gated_extraction import (
    HANG_GUARD_S,
    SLOW,
    extracted_by,
    extractions,
    gated_command,
    wait_until,
)
from tests.postgres.conftest import admin

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

TENANT = "acme"
LEASE_S = 2.0
HEARTBEAT_S = 0.5


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    """A private store schema name; dropped afterwards."""
    name = f"esra_test_leases_{uuid.uuid4().hex[:12]}"
    yield name
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def repository(pg_dsn: str, schema: str) -> AsyncIterator[PostgresDocumentRepository]:
    """The store's repository, its schema applied."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    repo = await PostgresDocumentRepository.open(pg_dsn, schema=schema, max_size=2)
    yield repo
    await repo.close()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Worker processes started by the test; any still running are killed at the end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=HANG_GUARD_S)


async def _queue(repository: PostgresDocumentRepository, *names: str) -> None:
    clock = FakeClock()
    for name in names:
        body = f"# {name}\n\nThe quokka ledger, entry {name}.\n".encode()
        (outcome,) = await upload_files(
            repository, TENANT, [(name, body)], scope="all", clock=clock
        )
        assert outcome.document is not None
        clock.advance(1)  # each strictly older than the next


def _worker(
    processes: list[subprocess.Popen[str]],
    dsn: str,
    schema: str,
    worker_id: str,
    *extra: str,
    release: Path,
    log: Path,
) -> subprocess.Popen[str]:
    args = [
        "--dsn",
        dsn,
        "--schema",
        schema,
        "--worker-id",
        worker_id,
        "--lease-s",
        str(LEASE_S),
        "--heartbeat-s",
        str(HEARTBEAT_S),
        "--poll-s",
        "0.1",
        *extra,
    ]
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and entry point
        gated_command(release, log, "esra.postgres.store_worker:main", args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes.append(process)
    return process


def _summary(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=HANG_GUARD_S)
    assert process.returncode == 0, err
    summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return summary


def _rows(dsn: str, schema: str) -> dict[str, tuple[str, int, str | None, datetime | None]]:
    """Per title: state, attempts, lease owner and lease deadline."""
    with admin(dsn) as conn:
        rows: list[tuple[Any, ...]] = conn.execute(
            sql.SQL("SELECT title, state, attempts, locked_by, lease_until FROM {}").format(
                sql.Identifier(schema, "documents")
            )
        ).fetchall()
    return {str(r[0]): (str(r[1]), int(r[2]), r[3], r[4]) for r in rows}


async def test_a_slow_document_is_renewed_and_never_costs_its_neighbours_an_attempt(
    pg_dsn: str,
    schema: str,
    repository: PostgresDocumentRepository,
    processes: list[subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    """The attack: A starts on a slow file with five tiny ones queued behind it. A holds only
    the slow one and keeps renewing its lease; B takes the five at their first attempt and
    keeps polling long after the slow one's first lease would have lapsed, never re-taking
    it. Every document is extracted exactly once, at attempt 1; nothing is lost."""
    tiny = [f"tiny-{n}.md" for n in range(5)]
    await _queue(repository, SLOW, *tiny)
    release, log = tmp_path / "release", tmp_path / "extractions.log"
    holder = _worker(processes, pg_dsn, schema, "A", "--until-idle", release=release, log=log)
    wait_until(lambda: _rows(pg_dsn, schema)[SLOW][:3] == ("processing", 1, "A"), "A to hold it")
    rows = _rows(pg_dsn, schema)
    first_lease = rows[SLOW][3]
    assert first_lease is not None
    assert {rows[name][:2] for name in tiny} == {("pending", 0)}
    helper = _worker(processes, pg_dsn, schema, "B", release=release, log=log)
    wait_until(
        lambda: all(_rows(pg_dsn, schema)[name][0] == "indexed" for name in tiny),
        "B to index the five",
    )

    def renewed_past_two_leases() -> bool:
        lease = _rows(pg_dsn, schema)[SLOW][3]
        return lease is not None and lease > first_lease + timedelta(seconds=2 * LEASE_S)

    wait_until(renewed_past_two_leases, "A's renewals to carry the lease two leases on")
    assert _rows(pg_dsn, schema)[SLOW][:3] == ("processing", 1, "A")
    release.touch()
    held = _summary(holder)
    assert (held["claimed"], held["indexed"], held["lost"], held["retried"]) == (1, 1, 0, 0)
    helper.send_signal(signal.SIGTERM)
    helped = _summary(helper)
    assert (helped["claimed"], helped["indexed"], helped["lost"]) == (5, 5, 0)
    assert {row[:3] for row in _rows(pg_dsn, schema).values()} == {("indexed", 1, None)}
    assert extractions(log) == dict.fromkeys([SLOW, *tiny], 1)
    assert extracted_by(log, SLOW) == [holder.pid]


async def test_a_worker_killed_mid_extraction_hands_its_document_over_at_attempt_2(
    pg_dsn: str,
    schema: str,
    repository: PostgresDocumentRepository,
    processes: list[subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    """SIGKILL while A extracts the slow file: its renewals stop, the lease lapses, and B takes
    the document at attempt 2. The tiny files B indexed meanwhile kept attempt 1."""
    tiny = [f"tiny-{n}.md" for n in range(3)]
    await _queue(repository, SLOW, *tiny)
    log = tmp_path / "extractions.log"
    doomed = _worker(
        processes, pg_dsn, schema, "A", "--until-idle", release=tmp_path / "never", log=log
    )
    wait_until(lambda: _rows(pg_dsn, schema)[SLOW][:3] == ("processing", 1, "A"), "A to hold it")
    released = tmp_path / "released"
    released.touch()
    survivor = _worker(processes, pg_dsn, schema, "B", release=released, log=log)
    wait_until(
        lambda: all(_rows(pg_dsn, schema)[name][0] == "indexed" for name in tiny),
        "B to index the rest",
    )
    doomed.send_signal(signal.SIGKILL)
    doomed.communicate(timeout=HANG_GUARD_S)
    assert doomed.returncode == -signal.SIGKILL
    wait_until(lambda: _rows(pg_dsn, schema)[SLOW][0] == "indexed", "B to take it over")
    survivor.send_signal(signal.SIGTERM)
    tally = _summary(survivor)
    assert (tally["claimed"], tally["indexed"], tally["lost"], tally["failed"]) == (4, 4, 0, 0)
    rows = _rows(pg_dsn, schema)
    assert rows[SLOW][:2] == ("indexed", 2)
    assert {rows[name][:2] for name in tiny} == {("indexed", 1)}
    assert extracted_by(log, SLOW) == [doomed.pid, survivor.pid]
    assert extractions(log) == {SLOW: 2, **dict.fromkeys(tiny, 1)}
