"""The encrypted secret table's schema on SQLite, applied idempotently and versioned.

One table, ``esra_secrets``, keyed by ``(tenant_id, reference)``, holding only what
``esra.core.secrets.envelope`` produces: the KEK id, the wrapped data key and the value's
ciphertext (BLOBs). An index on ``kek_id`` serves the re-wrap scan. It can share a database
file with other ESRA tables (the embedded host's data directory database): its version is
recorded in its own ``esra_secrets_schema`` table.

Applying takes the write lock (``BEGIN IMMEDIATE``), so two processes initialising at once
apply it once.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

__all__ = [
    "SECRETS_TABLE",
    "SECRET_SCHEMA_VERSION",
    "apply_secret_schema",
    "secret_schema_version",
]

SECRET_SCHEMA_VERSION = 1
SECRETS_TABLE = "esra_secrets"
_VERSIONS = "esra_secrets_schema"

_VERSION_TABLE = f"""
CREATE TABLE IF NOT EXISTS {_VERSIONS} (
    version INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
)
"""

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
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_VERSIONS,)
    ).fetchone()
    if exists is None:
        return 0
    row = connection.execute(f"SELECT max(version) FROM {_VERSIONS}").fetchone()  # noqa: S608 - constant
    return int(row[0] or 0)


def apply_secret_schema(connection: sqlite3.Connection) -> int:
    """Bring the schema to ``SECRET_SCHEMA_VERSION`` in one transaction; return the version.

    Idempotent: migrations already recorded are skipped. The connection must be in
    autocommit mode (``isolation_level=None``) and writable.

    Raises:
        RuntimeError: if the table was created by a newer ESRA (its version is higher).
        sqlite3.Error: if the DDL fails (nothing is applied).
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(_VERSION_TABLE)
        current = secret_schema_version(connection)
        if current > SECRET_SCHEMA_VERSION:
            msg = (
                f"the secret table's schema version {current} is newer than {SECRET_SCHEMA_VERSION}"
            )
            raise RuntimeError(msg)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        for version in sorted(v for v in _MIGRATIONS if v > current):
            for statement in _MIGRATIONS[version]:
                connection.execute(statement)
            connection.execute(
                f"INSERT INTO {_VERSIONS} (version, applied_at) VALUES (?, ?)",  # noqa: S608 - constant
                (version, now),
            )
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return SECRET_SCHEMA_VERSION
