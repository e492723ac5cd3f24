"""The internal document store's schema: its own PostgreSQL schema, applied idempotently.

Everything the store creates lives in one schema (``esra_store`` by default), including the
record of which schema version was applied (``<schema>.schema_version``). Nothing is created
outside it and no extension is required, so the store can share a customer-managed database
without imposing bookkeeping on it. Version 1 creates:

- ``documents`` — metadata, queue columns (state, attempts, locked_by, lease_until), the
  original bytes (``bytea``) and the extracted text; a content hash unique per tenant among
  non-deleted documents (a partial unique index), and the partial index the claim uses;
- ``segments`` — one row per indexed segment, with a stored generated ``tsvector`` (the
  document title weighted ``A``, the segment's indexed text ``B``) and its GIN index;
- ``searchable_segments`` — the view retrieval searches: only segments of Indexed,
  non-deleted documents, with ``tenant_id`` and ``scope`` to filter on. Quarantined,
  failed, pending and deleted documents are excluded structurally, not by a query option.

Version 2 alters ``documents`` in place, so a version-1 store keeps its documents:

- ``owner_kind`` (``uploaded``, what every earlier row becomes, or ``connector``) and
  ``owner_connector`` (the connector's name, present exactly when connector-owned);
- ``previous_content``, ``edited_by`` and ``edit_reason``: the structure reserved, beside
  ``revision``, for editing a document's extracted text in place. They are nullable and
  unused — no API, Portal page or repository method reads or writes them yet — and say so
  in their column comments;
- ``uploaded_by`` (the uploading operator's subject, unknown for earlier rows) and
  ``failure_breach`` (which safety limit a document failed at upload broke);
- ``store_settings``: each tenant's scan policy, byte retention, attempt ceiling and batch
  size, with a revision and who set them, written only by the audited "configure" action.

Version 3 adds ``audit_outbox``: the audit records of the operators' actions (release,
reindex, delete), each inserted in the action's transaction and deleted once the audit sink
has it (``seq`` keeps their order; ``correlation_id`` is not unique, two actions on one
document share it). The store principal owns it, as every table of the schema.

Version 4 adds ``claim_seq`` to ``documents``: the document's claim counter, which every
claim increments and nothing resets (a re-index resets ``attempts``, so an attempt number
repeats). Heartbeat, completion and failure are fenced on it. Earlier rows start at 0 (a
constant default: no row is rewritten).

``apply_store_schema`` runs in one transaction under a transaction-scoped advisory lock, so
concurrent initialisations serialise and a failure leaves nothing half-applied.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from esra.core.docstore import SEARCHABLE_VIEW, STORE_SCHEMA_VERSION
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG
from esra.postgres._schema_migrations import (
    create_versioned_schema,
    lock_schema,
    recorded_version,
)

__all__ = [
    "DEFAULT_STORE_SCHEMA",
    "SEARCHABLE_VIEW",
    "STORE_SCHEMA_VERSION",
    "StoreSchemaConflictError",
    "apply_store_schema",
    "store_schema_migrations",
    "store_schema_statements",
    "store_schema_version",
]

DEFAULT_STORE_SCHEMA = "esra_store"
# STORE_SCHEMA_VERSION and SEARCHABLE_VIEW are every engine's (esra.core._docstore.store_schema);
# they stay importable from here for the callers that always have.

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_STATES = "'pending', 'processing', 'indexed', 'quarantined', 'failed'"
_RESERVED_COMMENT = (
    "Reserved for editing extracted text in place (with revision); unused by any ESRA API."
)


class StoreSchemaConflictError(Exception):
    """The schema already holds a store applied with another text search configuration."""


def _check_name(schema: str) -> None:
    # Plain lowercase identifiers only: the name is also used inside index names.
    if not _NAME.fullmatch(schema):
        msg = "the store schema name must be a lowercase identifier of at most 63 characters"
        raise ValueError(msg)


def _version_table(schema: str) -> sql.Composed:
    return sql.SQL(
        "CREATE TABLE IF NOT EXISTS {t} ("
        " version integer PRIMARY KEY,"
        " text_search_config text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(t=sql.Identifier(schema, "schema_version"))


def store_schema_statements(
    schema: str = DEFAULT_STORE_SCHEMA, config: str = DEFAULT_TEXT_SEARCH_CONFIG
) -> tuple[sql.Composed, ...]:
    """Return version 1's DDL for ``schema`` (tables, indexes, view), in order.

    Raises:
        ValueError: if ``schema`` is not a plain lowercase identifier.
    """
    _check_name(schema)

    def ident(name: str) -> sql.Identifier:
        return sql.Identifier(schema, name)

    cfg = sql.Literal(config)
    documents, segments = ident("documents"), ident("segments")
    return (
        sql.SQL(
            "CREATE TABLE {d} ("
            " seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,"
            " id text PRIMARY KEY DEFAULT gen_random_uuid()::text,"
            " tenant_id text NOT NULL,"
            " title text NOT NULL,"
            " format text NOT NULL,"
            " sha256 text NOT NULL,"
            " size bigint NOT NULL CHECK (size >= 0),"
            " scope text NOT NULL,"
            " state text NOT NULL DEFAULT 'pending' CHECK (state IN ({states})),"
            " attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),"
            " locked_by text,"
            " lease_until timestamptz,"
            " failure text,"
            " remedy text,"
            " findings jsonb NOT NULL DEFAULT '[]'::jsonb,"
            " revision integer NOT NULL DEFAULT 0,"
            " segment_count integer NOT NULL DEFAULT 0,"
            " bytes_retained boolean NOT NULL DEFAULT true,"
            " deleted_at timestamptz,"
            " released_by text,"
            " created_at timestamptz NOT NULL,"
            " updated_at timestamptz NOT NULL,"
            " data bytea,"
            " text text)"
        ).format(d=documents, states=sql.SQL(_STATES)),
        # Originals are mostly compressed already (PDF, DOCX): don't spend CPU on pglz.
        sql.SQL("ALTER TABLE {d} ALTER COLUMN data SET STORAGE EXTERNAL").format(d=documents),
        sql.SQL(
            "CREATE UNIQUE INDEX {n} ON {d} (tenant_id, sha256) WHERE deleted_at IS NULL"
        ).format(n=sql.Identifier("documents_tenant_sha256"), d=documents),
        # The claim's index: only queued rows are in it, so it stays small however many
        # documents the store holds, and it yields them oldest first per tenant.
        sql.SQL(
            "CREATE INDEX {n} ON {d} (tenant_id, created_at, seq)"
            " WHERE state IN ('pending', 'processing') AND deleted_at IS NULL"
        ).format(n=sql.Identifier("documents_claimable"), d=documents),
        sql.SQL("CREATE INDEX {n} ON {d} (tenant_id, created_at DESC, seq DESC)").format(
            n=sql.Identifier("documents_tenant_recent"), d=documents
        ),
        sql.SQL(
            "CREATE TABLE {s} ("
            " document_id text NOT NULL REFERENCES {d} (id) ON DELETE CASCADE,"
            " tenant_id text NOT NULL,"
            " ordinal integer NOT NULL,"
            " label text NOT NULL,"
            " title text NOT NULL,"
            " body text NOT NULL,"
            " indexed text NOT NULL,"
            " tsv tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector({cfg}::regconfig, title), 'A')"
            " || setweight(to_tsvector({cfg}::regconfig, indexed), 'B')) STORED,"
            " PRIMARY KEY (document_id, ordinal))"
        ).format(s=segments, d=documents, cfg=cfg),
        sql.SQL("CREATE INDEX {n} ON {s} USING gin (tsv)").format(
            n=sql.Identifier("segments_tsv_gin"), s=segments
        ),
        sql.SQL(
            "CREATE VIEW {v} AS"
            " SELECT s.document_id, s.ordinal, s.tenant_id, d.scope, d.title, s.label,"
            " s.body, d.format, d.updated_at, s.tsv"
            " FROM {s} AS s JOIN {d} AS d ON d.id = s.document_id AND d.tenant_id = s.tenant_id"
            " WHERE d.state = 'indexed' AND d.deleted_at IS NULL"
        ).format(v=ident(SEARCHABLE_VIEW), s=segments, d=documents),
    )


def _owner_and_reserved_edits(schema: str) -> tuple[sql.Composed, ...]:
    """Version 2's DDL: owners, uploaders, breaches, reserved edit columns, store settings."""
    documents = sql.Identifier(schema, "documents")
    reserved = ("previous_content", "edited_by", "edit_reason")
    return (
        # One ALTER, one scan to validate the checks: a constant default is kept in the
        # catalogue (PostgreSQL 11+), so no existing row is rewritten.
        sql.SQL(
            "ALTER TABLE {d}"
            " ADD COLUMN owner_kind text NOT NULL DEFAULT 'uploaded',"
            " ADD COLUMN owner_connector text,"
            " ADD COLUMN previous_content text,"
            " ADD COLUMN edited_by text,"
            " ADD COLUMN edit_reason text,"
            " ADD COLUMN uploaded_by text,"
            " ADD COLUMN failure_breach text,"
            " ADD CONSTRAINT {kind} CHECK (owner_kind IN ('uploaded', 'connector')),"
            " ADD CONSTRAINT {named}"
            " CHECK ((owner_kind = 'connector') = (owner_connector IS NOT NULL))"
        ).format(
            d=documents,
            kind=sql.Identifier("documents_owner_kind"),
            named=sql.Identifier("documents_owner_connector_named"),
        ),
        *(
            sql.SQL("COMMENT ON COLUMN {d}.{c} IS {text}").format(
                d=documents, c=sql.Identifier(column), text=sql.Literal(_RESERVED_COMMENT)
            )
            for column in reserved
        ),
        # The store's own settings, one row per tenant, changed only by the audited
        # "configure" action; a tenant without a row uses the host's defaults.
        sql.SQL(
            "CREATE TABLE {t} ("
            " tenant_id text PRIMARY KEY,"
            " scan_policy text NOT NULL"
            " CHECK (scan_policy IN ('quarantine', 'reject', 'index_anyway')),"
            " retain_bytes boolean NOT NULL,"
            " max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),"
            " batch_per_tenant integer NOT NULL CHECK (batch_per_tenant BETWEEN 1 AND 1000),"
            " revision integer NOT NULL CHECK (revision >= 1),"
            " updated_at timestamptz NOT NULL,"
            " updated_by text NOT NULL)"
        ).format(t=sql.Identifier(schema, "store_settings")),
    )


def _audit_outbox(schema: str) -> tuple[sql.Composed, ...]:
    """Version 3's DDL: the outbox of the operators' actions' audit records."""
    return (
        sql.SQL(
            "CREATE TABLE {t} ("
            " seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " correlation_id text NOT NULL,"
            " record jsonb NOT NULL)"
        ).format(t=sql.Identifier(schema, "audit_outbox")),
    )


def _claim_seq(schema: str) -> tuple[sql.Composed, ...]:
    """Version 4's DDL: the claim counter a claim's writes are fenced on."""
    return (
        sql.SQL(
            "ALTER TABLE {d} ADD COLUMN claim_seq bigint NOT NULL DEFAULT 0"
            " CONSTRAINT {named} CHECK (claim_seq >= 0)"
        ).format(
            d=sql.Identifier(schema, "documents"),
            named=sql.Identifier("documents_claim_seq_counts"),
        ),
    )


def store_schema_migrations(
    schema: str = DEFAULT_STORE_SCHEMA, config: str = DEFAULT_TEXT_SEARCH_CONFIG
) -> dict[int, tuple[sql.Composed, ...]]:
    """Every version's DDL for ``schema``, by the version it brings the store to.

    Raises:
        ValueError: if ``schema`` is not a plain lowercase identifier.
    """
    return {
        1: store_schema_statements(schema, config),
        2: _owner_and_reserved_edits(schema),
        3: _audit_outbox(schema),
        4: _claim_seq(schema),
    }


async def store_schema_version(
    connection: psycopg.AsyncConnection[Any], schema: str = DEFAULT_STORE_SCHEMA
) -> int:
    """The schema version applied in ``schema`` (0 when the store was never applied)."""
    _check_name(schema)
    return await recorded_version(connection, schema, "schema_version")


async def apply_store_schema(
    connection: psycopg.AsyncConnection[Any],
    schema: str = DEFAULT_STORE_SCHEMA,
    config: str = DEFAULT_TEXT_SEARCH_CONFIG,
) -> bool:
    """Create the store in ``schema``, or migrate it to ``STORE_SCHEMA_VERSION`` in place.

    Each version above the one recorded is applied in order and recorded with ``config``
    (a version-1 store gains version 2's columns and keeps its documents). Returns whether
    anything was applied (False on a repeat run).

    Raises:
        ValueError: if ``schema`` is not a plain lowercase identifier.
        StoreSchemaConflictError: if the store exists with another text search configuration.
        psycopg.Error: if the configuration is unknown or the DDL fails (nothing is kept).
    """
    migrations = store_schema_migrations(schema, config)
    async with connection.transaction():
        # Serialise concurrent initialisations of the same schema (released at commit).
        await lock_schema(connection, "esra.store", schema)
        await connection.execute("SELECT CAST(%s::text AS regconfig)", (config,))
        await create_versioned_schema(connection, schema, _version_table(schema))
        versions = sql.Identifier(schema, "schema_version")
        cursor = await connection.execute(
            sql.SQL("SELECT version, text_search_config FROM {} ORDER BY version").format(versions)
        )
        applied = {int(v): str(c) for v, c in await cursor.fetchall()}
        # The segments' tsvector was generated with version 1's configuration: another
        # one would index new segments differently from the stored ones.
        if any(recorded != config for recorded in applied.values()):
            msg = "the store was initialised with another text search configuration"
            raise StoreSchemaConflictError(msg)
        current = max(applied, default=0)
        pending = sorted(v for v in migrations if v > current)
        for version in pending:
            for statement in migrations[version]:
                await connection.execute(statement)
            await connection.execute(
                sql.SQL("INSERT INTO {} (version, text_search_config) VALUES (%s, %s)").format(
                    versions
                ),
                (version, config),
            )
    return bool(pending)
