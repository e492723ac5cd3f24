"""The configuration store's schema on SQLite, applied idempotently and versioned.

Three tables, next to whatever else the database holds (the embedded default keeps them in
the data directory's database, beside the document store's ``store_*`` tables):

- ``config_workspaces`` — one row per tenant: its current draft document and version;
- ``config_changes`` — one row per saved version: who, when, why, what, and the workspace
  document as saved (append-only: triggers refuse UPDATE and DELETE);
- ``config_published`` — one row per published version, the snapshot as published
  (immutable: triggers refuse UPDATE and DELETE).

Version 2 adds ``config_store_states`` — one row per tenant: its document store's lifecycle
state as the last administrative action set it (status, when, a failure's reason and
remedy), shared by the processes on the database and kept across restarts.

Version 3 adds ``config_audit_outbox`` — the audit records of saved changes, each written in
the save's transaction and deleted once the audit sink has it (``seq`` keeps their order,
``correlation_id`` names each record).

The version applied is recorded in ``config_schema``; applying is safe to repeat and takes the
write lock (``BEGIN IMMEDIATE``), so two processes initialising at once apply it once.
"""

from __future__ import annotations

import sqlite3

from esra.sqlite._schema_migrations import apply_migrations, recorded_version

__all__ = ["CONFIG_SCHEMA_VERSION", "apply_config_schema", "config_schema_version"]

CONFIG_SCHEMA_VERSION = 3

_VERSION_TABLE = "config_schema"


def _immutable(table: str, what: str) -> tuple[str, str]:
    return (
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{what} are immutable'); END",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{what} are immutable'); END",
    )


# Migrations by the version they bring the schema to; each runs once, in order.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """
        CREATE TABLE config_workspaces (
            tenant_id TEXT PRIMARY KEY,
            version INTEGER NOT NULL CHECK (version > 0),
            published_version INTEGER,
            document TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE config_changes (
            tenant_id TEXT NOT NULL,
            version INTEGER NOT NULL CHECK (version > 0),
            subject TEXT NOT NULL,
            at TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            reason TEXT,
            document TEXT NOT NULL,
            PRIMARY KEY (tenant_id, version)
        )
        """,
        """
        CREATE TABLE config_published (
            tenant_id TEXT NOT NULL,
            version INTEGER NOT NULL CHECK (version > 0),
            snapshot TEXT NOT NULL,
            published_at TEXT NOT NULL,
            PRIMARY KEY (tenant_id, version)
        )
        """,
        *_immutable("config_changes", "configuration changes"),
        *_immutable("config_published", "published snapshots"),
    ),
    2: (
        """
        CREATE TABLE config_store_states (
            tenant_id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            changed_at TEXT NOT NULL,
            failure TEXT,
            remedy TEXT
        )
        """,
    ),
    3: (
        """
        CREATE TABLE config_audit_outbox (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            correlation_id TEXT NOT NULL UNIQUE,
            record TEXT NOT NULL
        )
        """,
    ),
}


def config_schema_version(connection: sqlite3.Connection) -> int:
    """Return the schema version recorded (0 when none was ever applied)."""
    return recorded_version(connection, _VERSION_TABLE)


def apply_config_schema(connection: sqlite3.Connection) -> int:
    """Bring the schema to ``CONFIG_SCHEMA_VERSION`` in one transaction; return the version.

    Idempotent: migrations already recorded are skipped. The connection must be in
    autocommit mode (``isolation_level=None``) and writable.

    Raises:
        RuntimeError: if the database was written by a newer ESRA (its version is higher).
        sqlite3.Error: if the DDL fails (nothing is applied).
    """
    return apply_migrations(
        connection,
        version_table=_VERSION_TABLE,
        migrations=_MIGRATIONS,
        target=CONFIG_SCHEMA_VERSION,
        subject="configuration",
    )
