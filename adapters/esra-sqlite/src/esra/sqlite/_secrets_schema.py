"""The encrypted secret table's schema on SQLite, applied idempotently and versioned.

One table, ``esra_secrets``, keyed by ``(tenant_id, reference)``, holding only what
``esra.core._secrets.envelope`` produces: the KEK id, the wrapped data key and the value's
ciphertext (BLOBs). An index on ``kek_id`` serves the re-wrap scan. It can share a database
file with other ESRA tables (the embedded host's data directory database): its version is
recorded in its own ``esra_secrets_schema`` table.

Applying takes the write lock (``BEGIN IMMEDIATE``), so two processes initialising at once
apply it once.
"""

from __future__ import annotations

import sqlite3

from esra.sqlite._schema_migrations import apply_migrations, recorded_version

__all__ = [
    "SECRETS_TABLE",
    "SECRET_SCHEMA_VERSION",
    "apply_secret_schema",
    "secret_schema_version",
]

SECRET_SCHEMA_VERSION = 1
SECRETS_TABLE = "esra_secrets"
_VERSIONS = "esra_secrets_schema"

# Migrations by the version they bring the schema to; each runs once, in order.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        f"""
        CREATE TABLE {SECRETS_TABLE} (
            tenant_id TEXT NOT NULL,
            reference TEXT NOT NULL,
            version INTEGER NOT NULL,
            kek_id TEXT NOT NULL,
            wrapped_dek BLOB NOT NULL,
            ciphertext BLOB NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (tenant_id, reference)
        ) WITHOUT ROWID
        """,
        f"CREATE INDEX {SECRETS_TABLE}_kek ON {SECRETS_TABLE} (kek_id, tenant_id, reference)",
    ),
}


def secret_schema_version(connection: sqlite3.Connection) -> int:
    """Return the secret table's schema version (0 when none was ever applied)."""
    return recorded_version(connection, _VERSIONS)


def apply_secret_schema(connection: sqlite3.Connection) -> int:
    """Bring the schema to ``SECRET_SCHEMA_VERSION`` in one transaction; return the version.

    Idempotent: migrations already recorded are skipped. The connection must be in
    autocommit mode (``isolation_level=None``) and writable.

    Raises:
        RuntimeError: if the table was created by a newer ESRA (its version is higher).
        sqlite3.Error: if the DDL fails (nothing is applied).
    """
    return apply_migrations(
        connection,
        version_table=_VERSIONS,
        migrations=_MIGRATIONS,
        target=SECRET_SCHEMA_VERSION,
        subject="secret table's",
    )
