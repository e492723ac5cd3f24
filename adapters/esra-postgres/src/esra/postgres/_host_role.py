"""What the host's database role may do in the state schemas an owner applied for it.

A deployment that keeps the host from owning its own state runs the host with
``[state] apply_schemas = false`` and has an owner (maintenance) role apply the
configuration, secret and audit schemas and grant the host's role exactly what it uses,
with ``grant_state_host_role`` (``esra migrate --grant-to ROLE`` does both):

- configuration: ``SELECT, INSERT, UPDATE`` on ``workspaces`` (a tenant's current draft is
  one row, replaced under optimistic concurrency) and ``SELECT, INSERT`` on the append-only
  ``changes`` and immutable ``published``; ``SELECT, INSERT, DELETE`` on ``audit_outbox``
  (an audit record waits there from its change's save until the audit sink has it, then is
  deleted — the one table the host deletes from);
- secrets: ``SELECT, INSERT, UPDATE`` on ``secrets`` (a rotation or a re-wrap replaces the
  row); never ``DELETE``;
- audit: ``grant_audit_writer`` — ``SELECT, INSERT`` on ``records``, nothing more.

Each grant comes with ``USAGE`` on the schema and ``SELECT`` on its version table (the host
checks the applied version at start), and revokes ``DELETE`` (where not granted),
``TRUNCATE``, ``REFERENCES`` and ``TRIGGER`` explicitly, in case an earlier grant gave them.
Because the host's role owns nothing, the server refuses it any DDL in these schemas — it
cannot drop a trigger, the audit table or the schema itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import sql

from esra.postgres._audit_schema import grant_audit_writer

__all__ = ["grant_config_writer", "grant_secret_writer", "grant_state_host_role"]

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# Never granted to the host's role on a state table, unless the table's grant names it.
_REVOKED = ("DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")


def _check(name: str, what: str) -> None:
    if not _NAME.fullmatch(name):
        msg = f"the {what} name must be a lowercase identifier of at most 63 characters"
        raise ValueError(msg)


async def _grant(
    connection: psycopg.AsyncConnection[Any],
    role: str,
    schema: str,
    tables: Mapping[str, str],
) -> None:
    """``USAGE`` on ``schema`` and, per table, its privileges; the rest revoked."""
    _check(schema, "schema")
    _check(role, "role")
    who = sql.Identifier(role)
    async with connection.transaction():
        await connection.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {s} TO {w}").format(s=sql.Identifier(schema), w=who)
        )
        for table, privileges in tables.items():
            target = sql.Identifier(schema, table)
            await connection.execute(
                sql.SQL("GRANT {p} ON {t} TO {w}").format(p=sql.SQL(privileges), t=target, w=who)
            )
            granted = {privilege.strip() for privilege in privileges.split(",")}
            revoked = ", ".join(p for p in _REVOKED if p not in granted)
            await connection.execute(
                sql.SQL("REVOKE {p} ON {t} FROM {w}").format(p=sql.SQL(revoked), t=target, w=who)
            )


async def grant_config_writer(
    connection: psycopg.AsyncConnection[Any], role: str, schema: str
) -> None:
    """Let ``role`` keep drafts, their history and publications in ``schema``. Run as the owner.

    Raises:
        ValueError: a name is not a plain lowercase identifier.
    """
    await _grant(
        connection,
        role,
        schema,
        {
            "schema_version": "SELECT",
            "workspaces": "SELECT, INSERT, UPDATE",
            "changes": "SELECT, INSERT",
            "published": "SELECT, INSERT",
            "store_states": "SELECT, INSERT, UPDATE",
            "audit_outbox": "SELECT, INSERT, DELETE",
        },
    )


async def grant_secret_writer(
    connection: psycopg.AsyncConnection[Any], role: str, schema: str
) -> None:
    """Let ``role`` write, read and re-wrap stored secrets in ``schema``. Run as the owner.

    Raises:
        ValueError: a name is not a plain lowercase identifier.
    """
    await _grant(
        connection,
        role,
        schema,
        {"secret_schema_version": "SELECT", "secrets": "SELECT, INSERT, UPDATE"},
    )


async def grant_state_host_role(
    connection: psycopg.AsyncConnection[Any],
    role: str,
    *,
    config_schema: str,
    secrets_schema: str,
    audit_schema: str | None,
) -> None:
    """Every grant the host's ``role`` needs on the state schemas (``audit_schema`` None:
    the audit is not kept in this database). Run as the owner, after applying them.

    Raises:
        ValueError: a name is not a plain lowercase identifier.
    """
    await grant_config_writer(connection, role, config_schema)
    await grant_secret_writer(connection, role, secrets_schema)
    if audit_schema is not None:
        await grant_audit_writer(connection, role, audit_schema)
        await connection.execute(
            sql.SQL("GRANT SELECT ON {t} TO {w}").format(
                t=sql.Identifier(audit_schema, "schema_version"), w=sql.Identifier(role)
            )
        )
