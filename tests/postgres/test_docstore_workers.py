"""Ingestion workers as real OS processes against one PostgreSQL store.

Workers are ``python -m esra.postgres.store_worker`` processes. To hold a document
mid-extraction, a worker is started through a ``python -c`` wrapper that replaces the
extraction function the ingestion module calls with one that sleeps first (the test hook),
then runs the same entry point; ``tests._gated_extraction`` holds it until a file appears.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from esra.core._docstore.ingestion import upload_files
from esra.core.testing import FakeClock
from esra.postgres import PostgresDocumentRepository, apply_store_schema
from tests._gated_extraction import SLOW, gated_command
from tests.postgres.conftest import admin

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

_STALL = """
import sys, time
import esra.core._docstore.ingestion as ingestion
from esra.postgres.store_worker import main
real = ingestion.extract
def stalled(*args, **kwargs):
    time.sleep(float(sys.argv[1]))
    return real(*args, **kwargs)
ingestion.extract = stalled
raise SystemExit(main(sys.argv[2:]))
"""
_DEADLINE_S = 60.0


@pytest.fixture
def store(pg_dsn: str) -> Iterator[str]:
    """A freshly applied store schema; dropped afterwards."""
    schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
    yield schema
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
async def repository(pg_dsn: str, store: str) -> AsyncIterator[PostgresDocumentRepository]:
    """The store's repository (the schema applied with the 'simple' configuration)."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, store, "simple")
    repo = await PostgresDocumentRepository.open(pg_dsn, schema=store, max_size=2)
    yield repo
    await repo.close()


def _worker(
    dsn: str, schema: str, worker_id: str, *extra: str, stall_s: float | None = None
) -> subprocess.Popen[str]:
    args = ["--dsn", dsn, "--worker-id", worker_id, "--schema", schema, "--poll-s", "0.2", *extra]
    if stall_s is None:
        command = [sys.executable, "-m", "esra.postgres.store_worker", *args]
    else:
        command = [sys.executable, "-c", _STALL, str(stall_s), *args]
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )


def _summary(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=_DEADLINE_S)
    assert process.returncode == 0, err
    summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return summary


def _row(dsn: str, schema: str, query: str, *params: object) -> tuple[Any, ...]:
    with admin(dsn) as conn:
        row = conn.execute(
            sql.SQL(query).format(d=sql.Identifier(schema, "documents")), params
        ).fetchone()
    assert row is not None
    return tuple(row)


def _wait_for(dsn: str, schema: str, query: str, *params: object) -> None:
    """Poll until ``query`` returns true (bounded; no wall-clock assertion)."""
    deadline = time.monotonic() + _DEADLINE_S
    while not _row(dsn, schema, query, *params)[0]:
        assert time.monotonic() < deadline, f"timed out waiting for: {query}"
        time.sleep(0.1)


async def _upload(repo: PostgresDocumentRepository, tenant: str, count: int) -> list[str]:
    files = [
        (f"note-{i}.txt", f"Note {i}\n\nThe number {i} of {tenant}.\n".encode())
        for i in range(count)
    ]
    outcomes = await upload_files(repo, tenant, files, scope="all", clock=FakeClock())
    return [o.document.id for o in outcomes if o.document is not None]


@pytest.mark.slow
async def test_a_killed_workers_document_is_recovered_after_its_lease(
    pg_dsn: str, store: str, repository: PostgresDocumentRepository
) -> None:
    """SIGKILL mid-extraction: another worker reclaims the document once the lease expires."""
    (doc,) = await _upload(repository, "acme", 1)
    doomed = _worker(pg_dsn, store, "w1", "--lease-s", "2", "--until-idle", stall_s=120)
    try:
        _wait_for(pg_dsn, store, "SELECT state = 'processing' AND locked_by = 'w1' FROM {d}")
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=_DEADLINE_S)
    assert doomed.returncode == -signal.SIGKILL
    assert _row(pg_dsn, store, "SELECT state, attempts FROM {d}") == ("processing", 1)
    _wait_for(pg_dsn, store, "SELECT lease_until <= now() FROM {d}")
    summary = _summary(_worker(pg_dsn, store, "w2", "--until-idle"))
    assert (summary["claimed"], summary["indexed"]) == (1, 1)
    state, attempts, revision, locked_by = _row(
        pg_dsn, store, "SELECT state, attempts, revision, locked_by FROM {d} WHERE id = %s", doc
    )
    assert (state, attempts, revision, locked_by) == ("indexed", 2, 1, None)


@pytest.mark.slow
async def test_a_stale_owners_completion_is_ignored(
    pg_dsn: str, store: str, repository: PostgresDocumentRepository, tmp_path: Path
) -> None:
    """A worker frozen mid-extraction (SIGSTOP: no heartbeat either) outlives its lease; the
    document is re-claimed, and once thawed its result is dropped as lost."""
    body = b"# Slow\n\nThe quokka ledger.\n"
    (outcome,) = await upload_files(
        repository, "acme", [(SLOW, body)], scope="all", clock=FakeClock()
    )
    assert outcome.document is not None
    doc = outcome.document.id
    release, log = tmp_path / "release", tmp_path / "extractions.log"
    args = ["--dsn", pg_dsn, "--worker-id", "w1", "--schema", store, "--lease-s", "1"]
    stale = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        gated_command(release, log, "esra.postgres.store_worker:main", [*args, "--until-idle"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(pg_dsn, store, "SELECT state = 'processing' AND locked_by = 'w1' FROM {d}")
        stale.send_signal(signal.SIGSTOP)
        release.touch()  # the frozen worker sees it only once thawed
        _wait_for(pg_dsn, store, "SELECT lease_until <= now() FROM {d}")
        fresh = _summary(_worker(pg_dsn, store, "w2", "--until-idle"))
        assert fresh["indexed"] == 1
    finally:
        stale.send_signal(signal.SIGCONT)
    late = _summary(stale)
    assert (late["claimed"], late["indexed"], late["lost"]) == (1, 0, 1)
    state, attempts, revision = _row(
        pg_dsn, store, "SELECT state, attempts, revision FROM {d} WHERE id = %s", doc
    )
    assert (state, attempts, revision) == ("indexed", 2, 1)


@pytest.mark.slow
async def test_four_workers_process_five_hundred_documents_exactly_once(
    pg_dsn: str, store: str, repository: PostgresDocumentRepository
) -> None:
    """Every document is claimed once, indexed once, with exactly one set of segments."""
    ids = await _upload(repository, "acme", 250) + await _upload(repository, "globex", 250)
    assert len(ids) == 500
    workers = [_worker(pg_dsn, store, f"w{i}", "--until-idle", "--batch", "10") for i in range(4)]
    summaries = [_summary(w) for w in workers]
    assert sum(s["claimed"] for s in summaries) == 500
    assert sum(s["indexed"] for s in summaries) == 500
    assert sum(s["lost"] + s["retried"] + s["failed"] for s in summaries) == 0
    assert _row(
        pg_dsn,
        store,
        "SELECT count(*), count(*) FILTER (WHERE state = 'indexed' AND attempts = 1"
        " AND revision = 1 AND segment_count = 1 AND locked_by IS NULL) FROM {d}",
    ) == (500, 500)
    with admin(pg_dsn) as conn:
        segments = conn.execute(
            sql.SQL("SELECT count(*), count(DISTINCT document_id) FROM {}").format(
                sql.Identifier(store, "segments")
            )
        ).fetchone()
    assert segments == (500, 500)


async def test_the_claim_uses_its_partial_index(
    pg_dsn: str, store: str, repository: PostgresDocumentRepository
) -> None:
    """EXPLAIN of the claim on 20,000 mostly indexed rows (planner left to choose freely)."""
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {d} (tenant_id, title, format, sha256, size, scope, state, attempts,"
                " revision, created_at, updated_at, data)"
                " SELECT 't' || (g % 20), 'doc ' || g, 'txt', md5(g::text), 1, 'all',"
                " CASE WHEN g % 1000 = 0 THEN 'pending' ELSE 'indexed' END, 1, 1,"
                " now() - make_interval(secs => g), now(), '\\x00'::bytea"
                " FROM generate_series(1, 20000) AS g"
            ).format(d=sql.Identifier(store, "documents"))
        )
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(store, "documents")))
        params = {
            "tenant": "t0",
            "worker": "w",
            "limit": 10,
            "lease": "60 seconds",
            "max": 3,
            "now": "2026-01-01T00:00:00Z",
        }
        plan = conn.execute(
            sql.SQL("EXPLAIN (FORMAT JSON) {}").format(repository.claim_statement()), params
        ).fetchone()
    assert plan is not None
    text = json.dumps(plan[0])
    assert "documents_claimable" in text
    assert '"Node Type": "Seq Scan"' not in text
    assert '"Node Type": "LockRows"' in text
