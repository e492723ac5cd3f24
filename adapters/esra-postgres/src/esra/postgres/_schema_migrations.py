"""Versioned, idempotent schema migrations for ESRA's own PostgreSQL schemas.

The document store, the configuration store, the audit log and the secret table each live in
a schema of their own and record, in a version table inside it, which versions were applied
(``schema_version``, or ``secret_schema_version`` so the secret schema can hold other
tables). Applying runs in the caller's one transaction: a transaction-scoped advisory lock
named for the schema serialises concurrent initialisations (released at commit), a failure
leaves nothing half-applied, and a schema written by a newer ESRA is refused rather than
downgraded. Nothing is created outside the schema and no extension is required.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

__all__ = [
    "apply_migrations",
    "create_versioned_schema",
    "lock_schema",
    "recorded_version",
    "version_table",
]


def version_table(schema: str, table: str) -> sql.Composed:
    """The DDL of a version table: one row per applied version, stamped by the server."""
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {t} ("
        " version integer PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(t=sql.Identifier(schema, table))


async def lock_schema(connection: psycopg.AsyncConnection[Any], lock: str, schema: str) -> None:
    """Take the advisory lock ``<lock>:<schema>`` until the current transaction ends."""
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{lock}:{schema}",)
    )


async def create_versioned_schema(
    connection: psycopg.AsyncConnection[Any], schema: str, versions: sql.Composed
) -> None:
    """Create ``schema`` and, with the DDL ``versions``, its version table, if absent."""
    await connection.execute(
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
    )
    await connection.execute(versions)


async def recorded_version(
    connection: psycopg.AsyncConnection[Any], schema: str, table: str
) -> int:
    """The highest version recorded in ``schema.table`` (0 when it does not exist yet).

    ``schema`` must already be a checked plain lowercase identifier.
    """
    cursor = await connection.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".{table}',)
    )
    row = await cursor.fetchone()
    if not row or not row[0]:
        return 0
    cursor = await connection.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(sql.Identifier(schema, table))
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def apply_migrations(
    connection: psycopg.AsyncConnection[Any],
    *,
    schema: str,
    table: str,
    lock: str,
    migrations: Mapping[int, Sequence[sql.Composed]],
    target: int,
    subject: str,
    newer: type[Exception] = RuntimeError,
) -> bool:
    """Run, in order, each migration above the recorded version; return whether any ran.

    Args:
        connection: an autocommit connection (this opens the one transaction).
        schema: a checked plain lowercase identifier; created if absent.
        table: the version table's name inside ``schema``.
        lock: the advisory lock's namespace (``esra.audit``, ...); the schema is appended.
        migrations: DDL statements by the version they bring the schema to.
        target: the version this ESRA knows (the highest key of ``migrations``).
        subject: names the schema in the error, as in ``the {subject} schema version``.
        newer: the exception raised when the recorded version is above ``target``.

    Raises:
        newer: the schema was written by a newer ESRA (nothing is applied).
        psycopg.Error: the DDL failed (nothing is kept).
    """
    versions = sql.Identifier(schema, table)
    async with connection.transaction():
        await lock_schema(connection, lock, schema)
        await create_versioned_schema(connection, schema, version_table(schema, table))
        cursor = await connection.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(versions)
        )
        row = await cursor.fetchone()
        current = int(row[0]) if row else 0
        if current > target:
            msg = f"the {subject} schema version {current} is newer than {target}"
            raise newer(msg)
        pending = sorted(v for v in migrations if v > current)
        for version in pending:
            for statement in migrations[version]:
                await connection.execute(statement)
            await connection.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(versions), (version,)
            )
    return bool(pending)
