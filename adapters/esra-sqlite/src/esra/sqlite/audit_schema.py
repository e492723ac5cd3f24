"""The audit log's schema on SQLite, applied idempotently and versioned (``audit_schema``).

``audit_records`` is append-only by construction: a trigger aborts every ``UPDATE``, and a
``DELETE`` aborts unless the row is older than the latest cutoff recorded in
``audit_retention`` — which only ``SqliteAuditLog.prune_before`` writes, in the same
transaction as its delete, and which is itself append-only. SQLite has no roles, so this
guards against every code path that is not retention (a bug, a stray statement), not against
someone who can rewrite the file; a deployment that needs the database itself to refuse its
host uses PostgreSQL, where the host's role lacks the privilege.

It may share a database file with the document store: its tables and its version table have
their own names.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

__all__ = ["AUDIT_SCHEMA_VERSION", "AUDIT_TABLE", "apply_audit_schema", "audit_schema_version"]

AUDIT_SCHEMA_VERSION = 1
AUDIT_TABLE = "audit_records"

_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS audit_schema (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
)
"""


def _refusal(name: str, action: str, table: str, when: str = "") -> str:
    # Built from this module's constants only: a trigger that aborts ``action`` on ``table``.
    return (
        f"CREATE TRIGGER {name} BEFORE {action} ON {table} {when} "
        "BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END"
    )


_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """
        CREATE TABLE audit_records (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id TEXT NOT NULL,
            at TEXT NOT NULL,
            event TEXT NOT NULL,
            correlation_id TEXT NOT NULL,
            subject TEXT,
            outcome TEXT NOT NULL,
            reason TEXT,
            dimensions TEXT NOT NULL DEFAULT '{}'
        )
        """,
        # Reading: one tenant's records newest first, and one invocation's records.
        "CREATE INDEX audit_records_tenant_at ON audit_records (tenant_id, at, seq)",
        "CREATE INDEX audit_records_tenant_correlation"
        " ON audit_records (tenant_id, correlation_id)",
        # Retention: every tenant's records before a date.
        "CREATE INDEX audit_records_at ON audit_records (at)",
        """
        CREATE TABLE audit_retention (
            cutoff TEXT NOT NULL,
            applied_at TEXT NOT NULL
        )
        """,
        _refusal("audit_records_no_update", "UPDATE", "audit_records"),
        # Only rows older than the latest retention cutoff may go (no cutoff: none may).
        _refusal(
            "audit_records_no_delete",
            "DELETE",
            "audit_records",
            "WHEN old.at >= coalesce((SELECT max(cutoff) FROM audit_retention), '')",
        ),
        _refusal("audit_retention_no_update", "UPDATE", "audit_retention"),
        _refusal("audit_retention_no_delete", "DELETE", "audit_retention"),
    ),
}


def audit_schema_version(connection: sqlite3.Connection) -> int:
    """The audit schema version recorded in the database (0 when never applied)."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_schema'"
    ).fetchone()
    if exists is None:
        return 0
    row = connection.execute("SELECT max(version) FROM audit_schema").fetchone()
    return int(row[0] or 0)


def apply_audit_schema(connection: sqlite3.Connection) -> int:
    """Bring the audit schema to ``AUDIT_SCHEMA_VERSION`` in one transaction; return it.

    Idempotent. The connection must be in autocommit mode (``isolation_level=None``).

    Raises:
        RuntimeError: the database was created by a newer ESRA.
        sqlite3.Error: the DDL failed (nothing is applied).
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(_VERSION_TABLE)
        current = audit_schema_version(connection)
        if current > AUDIT_SCHEMA_VERSION:
            msg = f"the audit schema version {current} is newer than {AUDIT_SCHEMA_VERSION}"
            raise RuntimeError(msg)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        for version in sorted(v for v in _MIGRATIONS if v > current):
            for statement in _MIGRATIONS[version]:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO audit_schema (version, applied_at) VALUES (?, ?)", (version, now)
            )
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return AUDIT_SCHEMA_VERSION
