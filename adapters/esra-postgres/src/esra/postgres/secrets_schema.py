"""The encrypted secret table's schema on PostgreSQL, applied idempotently and versioned.

Everything lives in one schema (``esra_secrets`` by default): the ``secrets`` table, keyed
by ``(tenant_id, reference)``, holding only the KEK id, the wrapped data key and the value's
ciphertext (``bytea``, stored ``EXTERNAL``: ciphertext does not compress), an index on
``kek_id`` for the re-wrap scan, and ``secret_schema_version`` recording what was applied —
named so the schema can also hold other ESRA tables. No extension is required.

``apply_secret_schema`` runs in one transaction under a transaction-scoped advisory lock, so
concurrent initialisations serialise and a failure leaves nothing half-applied.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

__all__ = [
    "DEFAULT_SECRET_SCHEMA",
    "SECRET_SCHEMA_VERSION",
    "SecretSchemaVersionError",
    "apply_secret_schema",
    "secret_schema_statements",
    "secret_schema_version",
]

DEFAULT_SECRET_SCHEMA = "esra_secrets"
SECRET_SCHEMA_VERSION = 1
_VERSIONS = "secret_schema_version"
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class SecretSchemaVersionError(Exception):
    """The schema holds a secret table created by a newer ESRA."""


def _check_name(schema: str) -> None:
    if not isinstance(schema, str) or not _NAME.fullmatch(schema):
        msg = "the secret schema name must be a lowercase identifier of at most 63 characters"
        raise ValueError(msg)


# Migrations by the version they bring the schema to; each runs once, in order.
def _migrations(schema: str) -> dict[int, tuple[sql.Composed, ...]]:
    secrets = sql.Identifier(schema, "secrets")
    return {
        1: (
            sql.SQL(
                "CREATE TABLE {t} ("
                " tenant_id text NOT NULL,"
                " reference text NOT NULL,"
                " version smallint NOT NULL,"
                " kek_id text NOT NULL,"
                " wrapped_dek bytea NOT NULL,"
                " ciphertext bytea NOT NULL,"
                " updated_at timestamptz NOT NULL DEFAULT now(),"
                " PRIMARY KEY (tenant_id, reference))"
            ).format(t=secrets),
            sql.SQL("ALTER TABLE {t} ALTER COLUMN ciphertext SET STORAGE EXTERNAL").format(
                t=secrets
            ),
            sql.SQL(
                'CREATE INDEX {n} ON {t} (kek_id, tenant_id COLLATE "C", reference COLLATE "C")'
            ).format(n=sql.Identifier("secrets_kek"), t=secrets),
        ),
    }


def secret_schema_statements(schema: str = DEFAULT_SECRET_SCHEMA) -> tuple[sql.Composed, ...]:
    """Every migration's DDL for ``schema``, in order.

    Raises:
        ValueError: if ``schema`` is not a plain lowercase identifier.
    """
    _check_name(schema)
    migrations = _migrations(schema)
    return tuple(s for v in sorted(migrations) for s in migrations[v])


async def secret_schema_version(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_SECRET_SCHEMA
) -> int:
    """The schema version applied in ``schema`` (0 when never applied)."""
    _check_name(schema)
    cursor = await connection.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".{_VERSIONS}',)
    )
    row = await cursor.fetchone()
    if not row or not row[0]:
        return 0
    cursor = await connection.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(
            sql.Identifier(schema, _VERSIONS)
        )
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def apply_secret_schema(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_SECRET_SCHEMA
) -> bool:
    """Bring the secret table in ``schema`` to ``SECRET_SCHEMA_VERSION``.

    Returns whether anything was applied (False on a repeat run).

    Raises:
        ValueError: if ``schema`` is not a plain lowercase identifier.
        SecretSchemaVersionError: if a newer ESRA created the table.
        psycopg.Error: if the DDL fails (nothing is kept).
    """
    _check_name(schema)
    migrations = _migrations(schema)
    versions = sql.Identifier(schema, _VERSIONS)
    async with connection.transaction():
        await connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"esra.secrets:{schema}",)
        )
        await connection.execute(
            sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
        )
        await connection.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} ("
                " version integer PRIMARY KEY,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(versions)
        )
        cursor = await connection.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(versions)
        )
        row = await cursor.fetchone()
        current = int(row[0]) if row else 0
        if current > SECRET_SCHEMA_VERSION:
            msg = f"the secret schema version {current} is newer than {SECRET_SCHEMA_VERSION}"
            raise SecretSchemaVersionError(msg)
        pending = sorted(v for v in migrations if v > current)
        for version in pending:
            for statement in migrations[version]:
                await connection.execute(statement)
            await connection.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(versions), (version,)
            )
    return bool(pending)
