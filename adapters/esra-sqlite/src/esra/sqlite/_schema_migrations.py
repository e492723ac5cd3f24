"""Versioned, idempotent schema migrations for ESRA's own tables in a SQLite file.

The document store, the configuration store, the audit log and the secret table may all
share one database file (the embedded host's data directory database), so each schema keeps
its own version table, named by its module (``store_schema``, ``config_schema``,
``audit_schema``, ``esra_secrets_schema``), with one row per applied version. Applying is
one ``BEGIN IMMEDIATE`` transaction: two processes initialising at once apply each migration
once, a failed migration leaves nothing applied, and a database written by a newer ESRA is
refused rather than downgraded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from esra.sqlite._transactions import immediate_transaction

__all__ = ["apply_migrations", "recorded_version"]


def recorded_version(connection: sqlite3.Connection, version_table: str) -> int:
    """The highest version recorded in ``version_table`` (0 when it does not exist yet)."""
    exists = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (version_table,)
    ).fetchone()
    if exists is None:
        return 0
    row = connection.execute(f"SELECT max(version) FROM {version_table}").fetchone()  # noqa: S608 - a module constant
    return int(row[0] or 0)


def apply_migrations(
    connection: sqlite3.Connection,
    *,
    version_table: str,
    migrations: Mapping[int, Sequence[str]],
    target: int,
    subject: str,
) -> int:
    """Run, in order, each migration above the recorded version; return ``target``.

    Args:
        connection: writable, in autocommit mode (``isolation_level=None``).
        version_table: the schema's own version table (a constant of its module).
        migrations: DDL statements by the version they bring the schema to.
        target: the version this ESRA knows (the highest key of ``migrations``).
        subject: names the schema in the error, as in ``the {subject} schema version``.

    Raises:
        RuntimeError: if the recorded version is newer than ``target`` (nothing is applied).
        sqlite3.Error: if the DDL fails (nothing is applied).
    """
    with immediate_transaction(connection):
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {version_table} (\n"
            "    version INTEGER PRIMARY KEY,\n"
            "    applied_at TEXT NOT NULL\n"
            ")"
        )
        current = recorded_version(connection, version_table)
        if current > target:
            msg = f"the {subject} schema version {current} is newer than {target}"
            raise RuntimeError(msg)
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        for version in sorted(v for v in migrations if v > current):
            for statement in migrations[version]:
                connection.execute(statement)
            connection.execute(
                f"INSERT INTO {version_table} (version, applied_at) VALUES (?, ?)",  # noqa: S608 - a module constant
                (version, now),
            )
    return target
