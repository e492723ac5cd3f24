"""SqliteAuditLog: the audit contract, append-only triggers, retention and schema versioning."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from esra.core._audit.query import AuditQuery
from esra.core.testing.audit_contract import T0, TENANT, AuditLogContract, contract_record
from esra.sqlite._audit import SqliteAuditLog
from esra.sqlite._audit_schema import AUDIT_SCHEMA_VERSION, audit_schema_version


async def _open(path: Path) -> SqliteAuditLog:
    log = SqliteAuditLog(path)
    await log.initialize()
    return log


class TestSqliteAuditLog(AuditLogContract):
    """The SQLite log honours the contract."""

    async def make_log(self, tmp_path: Path) -> SqliteAuditLog:
        """A fresh database file, schema applied."""
        return await _open(tmp_path / "audit.db")


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


async def test_rows_cannot_be_updated_or_deleted(tmp_path: Path) -> None:
    """Any other connection's UPDATE or DELETE aborts, even a bare DELETE of the table."""
    path = tmp_path / "audit.db"
    log = await _open(path)
    await log.write_batch([contract_record(1), contract_record(2)])
    assert await log.prune_before(T0 - timedelta(days=1)) == 0  # a cutoff row to attack
    await log.close()
    with _connect(path) as connection:
        for statement in (
            "UPDATE audit_records SET outcome = 'ok-ish'",
            "DELETE FROM audit_records WHERE seq = 1",
            "DELETE FROM audit_records",
            "UPDATE audit_retention SET cutoff = '9999'",
            "DELETE FROM audit_retention",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                connection.execute(statement)
        assert connection.execute("SELECT count(*) FROM audit_records").fetchone()[0] == 2


async def test_retention_removes_only_records_before_the_cutoff(tmp_path: Path) -> None:
    """prune_before deletes older records; newer ones stay protected afterwards too."""
    path = tmp_path / "audit.db"
    log = await _open(path)
    await log.write_batch([contract_record(n) for n in range(5)])
    assert await log.prune_before(T0 + timedelta(seconds=2)) == 2
    page = await log.query(AuditQuery(tenant_id=TENANT))
    assert [r.correlation_id for r in page.records] == ["corr-4", "corr-3", "corr-2"]
    await log.close()
    with _connect(path) as connection, pytest.raises(sqlite3.IntegrityError):
        connection.execute("DELETE FROM audit_records WHERE correlation_id = 'corr-2'")


async def test_schema_is_applied_once_and_shares_a_file(tmp_path: Path) -> None:
    """Initialising twice is a no-op; the version table is the audit's own."""
    path = tmp_path / "esra.db"
    with _connect(path) as connection:
        connection.execute("CREATE TABLE store_schema (version INTEGER PRIMARY KEY)")
    log = await _open(path)
    assert await log.initialize() == AUDIT_SCHEMA_VERSION
    await log.close()
    with _connect(path) as connection:
        assert audit_schema_version(connection) == AUDIT_SCHEMA_VERSION
        assert connection.execute("SELECT count(*) FROM audit_schema").fetchone()[0] == 1
