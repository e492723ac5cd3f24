"""The configuration store's schema on PostgreSQL: its own schema, applied idempotently.

Everything lives in one schema (``esra_config`` by default), including the record of which
version was applied (``<schema>.schema_version``). Version 1 creates:

- ``workspaces`` — one row per tenant: its current draft (``jsonb``, the converter's
  output) and version;
- ``changes`` — one row per saved version: who, when, why, what, and the workspace as
  saved; append-only;
- ``published`` — one row per published version, the snapshot as published; immutable.

Version 2 adds ``store_states`` — one row per tenant: its document store's lifecycle state
as the last administrative action set it (status, when, and a failure's reason and remedy),
shared by every host on the database.

Version 3 adds ``audit_outbox`` — the audit records of saved changes (``jsonb``), each
inserted in the save's transaction and deleted once the audit sink has it (``seq`` keeps
their order, ``correlation_id`` names each record).

Append-only and immutable are enforced by the server: a trigger refuses every UPDATE and
DELETE on ``changes`` and ``published``, whoever connects. ``apply_config_schema`` runs in
one transaction under a transaction-scoped advisory lock, so concurrent initialisations
serialise and a failure leaves nothing half-applied.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from esra.postgres._schema_migrations import apply_migrations, recorded_version

__all__ = [
    "CONFIG_NOTIFY_CHANNEL",
    "CONFIG_SCHEMA_VERSION",
    "DEFAULT_CONFIG_SCHEMA",
    "apply_config_schema",
    "config_schema_version",
]

DEFAULT_CONFIG_SCHEMA = "esra_config"
CONFIG_SCHEMA_VERSION = 3
# Every publication is announced here (payload ``<schema> <tenant> <version>``).
CONFIG_NOTIFY_CHANNEL = "esra_config_published"

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _check_name(schema: str) -> None:
    if not _NAME.fullmatch(schema):
        msg = (
            "the configuration schema name must be a lowercase identifier of at most 63 characters"
        )
        raise ValueError(msg)


def _statements(schema: str) -> tuple[sql.Composed, ...]:
    def ident(name: str) -> sql.Identifier:
        return sql.Identifier(schema, name)

    refuse = ident("refuse_change")
    statements: list[sql.Composed] = [
        sql.SQL(
            "CREATE TABLE {t} ("
            " tenant_id text PRIMARY KEY,"
            " version integer NOT NULL CHECK (version > 0),"
            " published_version integer,"
            " document jsonb NOT NULL,"
            " updated_at timestamptz NOT NULL)"
        ).format(t=ident("workspaces")),
        sql.SQL(
            "CREATE TABLE {t} ("
            " tenant_id text NOT NULL,"
            " version integer NOT NULL CHECK (version > 0),"
            " subject text NOT NULL,"
            " at timestamptz NOT NULL,"
            " action text NOT NULL,"
            " target text NOT NULL,"
            " reason text,"
            " document jsonb NOT NULL,"
            " PRIMARY KEY (tenant_id, version))"
        ).format(t=ident("changes")),
        sql.SQL(
            "CREATE TABLE {t} ("
            " tenant_id text NOT NULL,"
            " version integer NOT NULL CHECK (version > 0),"
            " snapshot jsonb NOT NULL,"
            " published_at timestamptz NOT NULL,"
            " PRIMARY KEY (tenant_id, version))"
        ).format(t=ident("published")),
        sql.SQL(
            "CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN RAISE EXCEPTION 'esra: % rows are immutable', TG_TABLE_NAME"
            " USING ERRCODE = 'restrict_violation'; END $$"
        ).format(f=refuse),
    ]
    for table in ("changes", "published"):
        statements.append(
            sql.SQL(
                "CREATE TRIGGER {n} BEFORE UPDATE OR DELETE OR TRUNCATE ON {t}"
                " FOR EACH STATEMENT EXECUTE FUNCTION {f}()"
            ).format(n=sql.Identifier(f"{table}_immutable"), t=ident(table), f=refuse)
        )
    return tuple(statements)


def _store_states(schema: str) -> tuple[sql.Composed, ...]:
    return (
        sql.SQL(
            "CREATE TABLE {t} ("
            " tenant_id text PRIMARY KEY,"
            " status text NOT NULL,"
            " changed_at timestamptz NOT NULL,"
            " failure text,"
            " remedy text)"
        ).format(t=sql.Identifier(schema, "store_states")),
    )


def _audit_outbox(schema: str) -> tuple[sql.Composed, ...]:
    return (
        sql.SQL(
            "CREATE TABLE {t} ("
            " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " correlation_id text NOT NULL UNIQUE,"
            " record jsonb NOT NULL)"
        ).format(t=sql.Identifier(schema, "audit_outbox")),
    )


async def config_schema_version(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_CONFIG_SCHEMA
) -> int:
    """The schema version applied in ``schema`` (0 when it was never applied)."""
    _check_name(schema)
    return await recorded_version(connection, schema, "schema_version")


async def apply_config_schema(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_CONFIG_SCHEMA
) -> bool:
    """Create the configuration store in ``schema`` unless that version is already applied.

    Returns whether anything was applied (False on a repeat run).

    Raises:
        ValueError: ``schema`` is not a plain lowercase identifier.
        RuntimeError: the schema was written by a newer ESRA.
        psycopg.Error: the DDL fails (nothing is kept).
    """
    _check_name(schema)
    return await apply_migrations(
        connection,
        schema=schema,
        table="schema_version",
        lock="esra.config",
        migrations={
            1: _statements(schema),
            2: _store_states(schema),
            3: _audit_outbox(schema),
        },
        target=CONFIG_SCHEMA_VERSION,
        subject="configuration",
    )
