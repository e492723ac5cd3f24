"""The audit log's schema on PostgreSQL: its own schema, append-only, applied idempotently.

Everything lives in one schema (``esra_audit`` by default), owned by the role that applies
it — the owner, or maintenance role. Version 1 creates:

- ``records`` — one row per audit record: ``seq`` (identity), ``tenant_id``, ``at``
  (timestamptz), ``event``, ``correlation_id``, ``subject`` (who acted), ``outcome``,
  ``reason``, ``dimensions`` (jsonb); indexed ``(tenant_id, at, seq)`` for reading one
  tenant newest first, ``(tenant_id, correlation_id)`` for one invocation, and a BRIN index
  on ``at`` for retention (records arrive in time order, so BRIN stays tiny and costs
  inserts almost nothing);
- triggers that refuse every ``UPDATE`` and ``TRUNCATE``, and every ``DELETE`` except of rows
  older than the cutoff ``prune_before`` has set for its own transaction — the owner
  included, so an ad-hoc statement cannot rewrite history by mistake;
- ``prune_before(cutoff timestamptz)`` — retention by date: deletes every tenant's records
  stamped before ``cutoff`` and returns how many. ``EXECUTE`` is revoked from ``PUBLIC``; it
  runs with its caller's rights, so only a role with ``DELETE`` (the owner) can use it.

The host connects as another role, granted by ``grant_audit_writer``: ``USAGE`` on the
schema and ``SELECT, INSERT`` on ``records`` — never ``UPDATE``, ``DELETE`` or ``TRUNCATE``,
so the database itself refuses the host any change to what it has written (the triggers are
the second line, for the owner). Retention is by date rather than by partition: no
partition-creation job to run ahead of time, no default partition to drain, and the table's
size is bounded by the retention period either way; a deployment that keeps years of audit
can partition ``records`` by month later without changing the host.

``apply_audit_schema`` runs in one transaction under a transaction-scoped advisory lock, so
concurrent initialisations serialise and a failure leaves nothing half-applied.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from esra.postgres._schema_migrations import apply_migrations, recorded_version

__all__ = [
    "AUDIT_SCHEMA_VERSION",
    "DEFAULT_AUDIT_SCHEMA",
    "apply_audit_schema",
    "audit_schema_statements",
    "audit_schema_version",
    "grant_audit_writer",
]

DEFAULT_AUDIT_SCHEMA = "esra_audit"
AUDIT_SCHEMA_VERSION = 1
PRUNE_SETTING = "esra.audit_prune_before"

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _check_name(name: str, what: str) -> None:
    if not _NAME.fullmatch(name):
        msg = f"the audit {what} name must be a lowercase identifier of at most 63 characters"
        raise ValueError(msg)


def audit_schema_statements(schema: str = DEFAULT_AUDIT_SCHEMA) -> tuple[sql.Composed, ...]:
    """Version 1's DDL for ``schema``, in order.

    Raises:
        ValueError: ``schema`` is not a plain lowercase identifier.
    """
    _check_name(schema, "schema")
    records = sql.Identifier(schema, "records")
    refuse = sql.Identifier(schema, "refuse_change")
    prune = sql.Identifier(schema, "prune_before")
    setting = sql.Literal(PRUNE_SETTING)
    return (
        sql.SQL(
            "CREATE TABLE {r} ("
            " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " tenant_id text NOT NULL,"
            " at timestamptz NOT NULL,"
            " event text NOT NULL,"
            " correlation_id text NOT NULL,"
            " subject text,"
            " outcome text NOT NULL,"
            " reason text,"
            " dimensions jsonb NOT NULL DEFAULT '{{}}'::jsonb)"
        ).format(r=records),
        sql.SQL("CREATE INDEX {n} ON {r} (tenant_id, at DESC, seq DESC)").format(
            n=sql.Identifier("records_tenant_at"), r=records
        ),
        sql.SQL("CREATE INDEX {n} ON {r} (tenant_id, correlation_id)").format(
            n=sql.Identifier("records_tenant_correlation"), r=records
        ),
        sql.SQL("CREATE INDEX {n} ON {r} USING brin (at)").format(
            n=sql.Identifier("records_at_brin"), r=records
        ),
        sql.SQL(
            "CREATE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS $body$"
            " BEGIN"
            "  IF TG_OP = 'DELETE' AND OLD.at"
            "     < nullif(current_setting({setting}, true), '')::timestamptz THEN"
            "   RETURN OLD;"
            "  END IF;"
            "  RAISE EXCEPTION 'audit records are append-only'"
            "   USING ERRCODE = 'insufficient_privilege';"
            " END $body$"
        ).format(f=refuse, setting=setting),
        sql.SQL(
            "CREATE TRIGGER records_append_only BEFORE UPDATE OR DELETE ON {r}"
            " FOR EACH ROW EXECUTE FUNCTION {f}()"
        ).format(r=records, f=refuse),
        sql.SQL(
            "CREATE TRIGGER records_no_truncate BEFORE TRUNCATE ON {r}"
            " FOR EACH STATEMENT EXECUTE FUNCTION {f}()"
        ).format(r=records, f=refuse),
        sql.SQL(
            "CREATE FUNCTION {p}(cutoff timestamptz) RETURNS bigint LANGUAGE plpgsql AS $body$"
            " DECLARE removed bigint;"
            " BEGIN"
            "  PERFORM set_config({setting}, cutoff::text, true);"
            "  DELETE FROM {r} WHERE at < cutoff;"
            "  GET DIAGNOSTICS removed = ROW_COUNT;"
            "  PERFORM set_config({setting}, '', true);"
            "  RETURN removed;"
            " END $body$"
        ).format(p=prune, r=records, setting=setting),
        sql.SQL("REVOKE ALL ON FUNCTION {p}(timestamptz) FROM PUBLIC").format(p=prune),
        sql.SQL("REVOKE ALL ON {r} FROM PUBLIC").format(r=records),
    )


async def audit_schema_version(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_AUDIT_SCHEMA
) -> int:
    """The audit schema version applied in ``schema`` (0 when never applied)."""
    _check_name(schema, "schema")
    return await recorded_version(connection, schema, "schema_version")


async def apply_audit_schema(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_AUDIT_SCHEMA
) -> bool:
    """Create the audit log in ``schema`` unless its version is applied; True if it was now.

    Run it as the owner (maintenance) role, never as the host's.

    Raises:
        ValueError: ``schema`` is not a plain lowercase identifier.
        RuntimeError: the schema was applied by a newer ESRA.
        psycopg.Error: the DDL failed (nothing is kept).
    """
    statements = audit_schema_statements(schema)
    return await apply_migrations(
        connection,
        schema=schema,
        table="schema_version",
        lock="esra.audit",
        migrations={1: statements},
        target=AUDIT_SCHEMA_VERSION,
        subject="audit",
    )


async def grant_audit_writer(
    connection: psycopg.AsyncConnection[Any], role: str, schema: str = DEFAULT_AUDIT_SCHEMA
) -> None:
    """Let ``role`` (the host's) append and read audit records, and nothing more.

    Grants ``USAGE`` on the schema and ``SELECT, INSERT`` on ``records``, and revokes
    ``UPDATE``, ``DELETE``, ``TRUNCATE`` and the retention function from it explicitly, in
    case an earlier grant gave them. Run as the owner.

    Raises:
        ValueError: a name is not a plain lowercase identifier.
    """
    _check_name(schema, "schema")
    _check_name(role, "role")
    records, who = sql.Identifier(schema, "records"), sql.Identifier(role)
    async with connection.transaction():
        for statement in (
            sql.SQL("GRANT USAGE ON SCHEMA {s} TO {w}"),
            sql.SQL("GRANT SELECT, INSERT ON {r} TO {w}"),
            sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {r} FROM {w}"),
            sql.SQL("REVOKE ALL ON FUNCTION {p}(timestamptz) FROM {w}"),
        ):
            await connection.execute(
                statement.format(
                    s=sql.Identifier(schema),
                    r=records,
                    w=who,
                    p=sql.Identifier(schema, "prune_before"),
                )
            )
