"""JsonLinesAuditLog: the audit contract on a file, plus what only a file has."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from esra.core._audit.jsonl import JsonLinesAuditLog
from esra.core._audit.query import AuditQuery
from esra.core.testing._audit_log import InMemoryAuditLog
from esra.core.testing.audit_contract import TENANT, AuditLogContract, contract_record


class TestJsonLinesAuditLog(AuditLogContract):
    """The file log honours the contract."""

    def make_log(self, tmp_path: Path) -> JsonLinesAuditLog:
        """A log at a fresh path (the file does not exist yet)."""
        return JsonLinesAuditLog(tmp_path / "audit.jsonl")


class TestInMemoryAuditLog(AuditLogContract):
    """The fake honours the same contract, so core tests may rely on it."""

    def make_log(self, tmp_path: Path) -> InMemoryAuditLog:
        """A new, empty list."""
        del tmp_path
        return InMemoryAuditLog()


async def test_a_rotated_file_is_followed_by_a_new_one(tmp_path: Path) -> None:
    """After the file is renamed away, the next batch creates a fresh file (0600)."""
    log = JsonLinesAuditLog(tmp_path / "audit.jsonl")
    await log.write_batch([contract_record(1)])
    (tmp_path / "audit.jsonl").rename(tmp_path / "audit.jsonl.1")
    await log.write_batch([contract_record(2)])
    assert [r.correlation_id for r in (await log.query(AuditQuery(tenant_id=TENANT))).records] == [
        "corr-2"
    ]
    assert len((tmp_path / "audit.jsonl.1").read_bytes().splitlines()) == 1
    assert stat.S_IMODE(os.stat(tmp_path / "audit.jsonl").st_mode) == 0o600


async def test_torn_and_garbage_lines_are_skipped(tmp_path: Path) -> None:
    """A crash mid-line and foreign text do not stop the reader."""
    path = tmp_path / "audit.jsonl"
    log = JsonLinesAuditLog(path)
    await log.write_batch([contract_record(1)])
    with path.open("ab") as handle:
        handle.write(b'not json\n{"event": "esra.unknown"}\n')
    await log.write_batch([contract_record(2)])
    with path.open("ab") as handle:
        handle.write(b'{"event": "esra.invoke", "tenant')
    found = (await log.query(AuditQuery(tenant_id=TENANT))).records
    assert [r.correlation_id for r in found] == ["corr-2", "corr-1"]


async def test_reading_a_missing_file_is_empty(tmp_path: Path) -> None:
    """No file yet: an empty page."""
    page = await JsonLinesAuditLog(tmp_path / "none.jsonl").query(AuditQuery(tenant_id=TENANT))
    assert list(page.records) == []
    assert page.next_cursor is None
