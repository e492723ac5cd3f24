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

from esra.sqlite._schema_migrations import apply_migrations, recorded_version

__all__ = ["AUDIT_SCHEMA_VERSION", "AUDIT_TABLE", "apply_audit_schema", "audit_schema_version"]

AUDIT_SCHEMA_VERSION = 1
AUDIT_TABLE = "audit_records"

_VERSION_TABLE = "audit_schema"


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
    return recorded_version(connection, _VERSION_TABLE)


def apply_audit_schema(connection: sqlite3.Connection) -> int:
    """Bring the audit schema to ``AUDIT_SCHEMA_VERSION`` in one transaction; return it.

    Idempotent. The connection must be in autocommit mode (``isolation_level=None``).

    Raises:
        RuntimeError: the database was created by a newer ESRA.
        sqlite3.Error: the DDL failed (nothing is applied).
    """
    return apply_migrations(
        connection,
        version_table=_VERSION_TABLE,
        migrations=_MIGRATIONS,
        target=AUDIT_SCHEMA_VERSION,
        subject="audit",
    )
