"""``esra audit`` reads a tenant's records back as JSON lines; ``esra audit-prune`` retains."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest

from esra.core._audit.codec import record_from_document
from esra.core._audit.jsonl import JsonLinesAuditLog
from esra.core.codes import AuditEvent
from esra.core.testing.audit_contract import T0, contract_record
from esra.sqlite._audit import SqliteAuditLog
from esra.starlette._cli import main

RECORDS = [
    contract_record(0, tenant="t-a", subject="alice"),
    contract_record(1, tenant="t-a", event=AuditEvent.FETCH, subject="bob"),
    contract_record(2, tenant="t-b", subject="alice"),
    contract_record(3, tenant="t-a", event=AuditEvent.FETCH, sources=("s-1",)),
]


def _sqlite(tmp_path: Path) -> Path:
    path = tmp_path / "audit.db"
    asyncio.run(_seed(path))
    return path


async def _seed(path: Path) -> None:
    log = SqliteAuditLog(path)
    await log.initialize()
    await log.write_batch(RECORDS)
    await log.close()


def _lines(out: str) -> list[str]:
    return [record_from_document(json.loads(line)).correlation_id for line in out.splitlines()]


def test_reads_the_tenants_records_with_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tenant scoped, newest first, identical records; event and subject filters apply."""
    path = _sqlite(tmp_path)
    assert main(["audit", "--sqlite", str(path), "--tenant", "t-a"]) == 0
    out = capsys.readouterr().out
    assert [record_from_document(json.loads(line)) for line in out.splitlines()] == [
        RECORDS[3],
        RECORDS[1],
        RECORDS[0],
    ]
    argv = ["audit", "--sqlite", str(path), "--tenant", "t-a", "--event", "esra.fetch"]
    assert main([*argv, "--subject", "bob"]) == 0
    assert _lines(capsys.readouterr().out) == ["corr-1"]
    since = (T0 + timedelta(seconds=1)).isoformat()
    assert main(["audit", "--sqlite", str(path), "--tenant", "t-a", "--since", since]) == 0
    assert _lines(capsys.readouterr().out) == ["corr-3", "corr-1"]


def test_pages_and_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A page and its cursor on stderr; --cursor continues; --all follows every page."""
    log = JsonLinesAuditLog(tmp_path / "audit.jsonl")
    asyncio.run(log.write_batch(RECORDS))
    argv = ["audit", "--jsonl", str(log.path), "--tenant", "t-a", "--limit", "2"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert _lines(captured.out) == ["corr-3", "corr-1"]
    cursor = captured.err.split("--cursor ")[1].strip()
    assert main([*argv, "--cursor", cursor]) == 0
    assert _lines(capsys.readouterr().out) == ["corr-0"]
    assert main([*argv, "--all"]) == 0
    assert _lines(capsys.readouterr().out) == ["corr-3", "corr-1", "corr-0"]


def test_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A forged cursor, a limit out of range, a missing database: a message, no traceback."""
    path = _sqlite(tmp_path)
    base = ["audit", "--sqlite", str(path), "--tenant", "t-a"]
    assert main([*base, "--cursor", "forged"]) == 2
    assert "cursor is invalid" in capsys.readouterr().err
    assert main([*base, "--limit", "0"]) == 2
    assert "limit" in capsys.readouterr().err
    assert main(["audit", "--sqlite", str(tmp_path / "none.db"), "--tenant", "t-a"]) == 1
    assert "no such database" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--since", "2026-03-01T00:00:00"])  # no offset
    assert "UTC offset" in capsys.readouterr().err


def test_prune_removes_older_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """audit-prune deletes every tenant's records before the cutoff and says how many."""
    path = _sqlite(tmp_path)
    cutoff = (T0 + timedelta(seconds=2)).isoformat()
    assert main(["audit-prune", "--sqlite", str(path), "--before", cutoff]) == 0
    assert capsys.readouterr().out.strip() == "2"
    assert main(["audit", "--sqlite", str(path), "--tenant", "t-a"]) == 0
    assert _lines(capsys.readouterr().out) == ["corr-3"]
