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

from esra.postgres._schema_migrations import apply_migrations, recorded_version

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
    return await recorded_version(connection, schema, _VERSIONS)


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
    return await apply_migrations(
        connection,
        schema=schema,
        table=_VERSIONS,
        lock="esra.secrets",
        migrations=_migrations(schema),
        target=SECRET_SCHEMA_VERSION,
        subject="secret",
        newer=SecretSchemaVersionError,
    )
