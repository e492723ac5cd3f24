"""The internal document store's schema on SQLite, applied idempotently and versioned.

Everything lives in the store's own database file: documents (metadata, queue columns and
the original bytes as a BLOB — never a filesystem path), their segments, an external-content
FTS5 index over the segments' indexed text, and the view retrieval searches.

``searchable_segments`` is what a store source's mapping names: it joins each segment to its
document and admits only Indexed, non-deleted documents, so Pending, Processing, Quarantined,
Failed and soft-deleted content is excluded by the relation itself, not by a filter a query
could forget. Its ``rowid`` column is the segment's rowid, which is also the FTS5 rowid, so
``esra.sqlite.SqliteFts5Provider`` joins ``searchable_segments`` to ``store_segments_fts`` on
``rowid`` exactly as it does for any external-content index.

Version 2 adds, in place (``ALTER TABLE … ADD COLUMN``, so a version-1 store keeps its
documents): each document's owner (``owner_kind`` ``uploaded`` — what every earlier row
becomes — or ``connector`` with ``owner_connector`` naming it), and the structure reserved
for editing a document's extracted text in place (``previous_content``, ``edited_by``,
``edit_reason``, beside the existing ``revision``). The reserved columns are nullable and
unused: no API, Portal page or repository method reads or writes them yet. It also records
who uploaded each document (``uploaded_by``), which safety limit a document failed at upload
broke (``failure_breach``), and each tenant's store settings (``store_settings``: scan
policy, byte retention, attempt ceiling and batch size, with a revision and who set them).

Version 3 adds ``store_audit_outbox`` — the audit records of the operators' actions
(release, reindex, delete), each written in the action's transaction and deleted once the
audit sink has it (``seq`` keeps their order).

Version 4 adds ``claim_seq`` to ``store_documents``: the document's claim counter, which
every claim increments and nothing resets (a re-index resets ``attempts``, so an attempt
number repeats). Heartbeat, completion and failure are fenced on it. Earlier rows start at 0.

The version applied is recorded in ``store_schema``; applying is safe to repeat and takes the
write lock (``BEGIN IMMEDIATE``), so two processes initialising at once apply it once.
"""

from __future__ import annotations

import sqlite3

from esra.core.docstore import SEARCHABLE_VIEW, STORE_SCHEMA_VERSION
from esra.sqlite._schema_migrations import apply_migrations, recorded_version

__all__ = [
    "DOCUMENTS_TABLE",
    "SEARCHABLE_VIEW",
    "SEGMENTS_FTS",
    "SEGMENTS_TABLE",
    "STORE_SCHEMA_VERSION",
    "apply_store_schema",
    "store_schema_statements",
    "store_schema_version",
]

# STORE_SCHEMA_VERSION and SEARCHABLE_VIEW are every engine's (esra.core._docstore.store_schema);
# they stay importable from here for the callers that always have.
DOCUMENTS_TABLE = "store_documents"
SEGMENTS_TABLE = "store_segments"
SEGMENTS_FTS = "store_segments_fts"

_VERSION_TABLE = "store_schema"

# Migrations by the version they bring the schema to; each runs once, in order.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """
        CREATE TABLE store_documents (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            tenant_id TEXT NOT NULL,
            title TEXT NOT NULL,
            format TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            size INTEGER NOT NULL,
            scope TEXT NOT NULL,
            state TEXT NOT NULL CHECK (
                state IN ('pending', 'processing', 'indexed', 'quarantined', 'failed')
            ),
            attempts INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            revision INTEGER NOT NULL DEFAULT 0,
            segment_count INTEGER NOT NULL DEFAULT 0,
            failure TEXT,
            remedy TEXT,
            findings TEXT NOT NULL DEFAULT '[]',
            original BLOB,
            deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
            deleted_at TEXT,
            released_by TEXT,
            released_at TEXT,
            worker_id TEXT,
            lease_until TEXT
        )
        """,
        # A content hash is unique among a tenant's live documents (deleting frees it).
        """
        CREATE UNIQUE INDEX store_documents_hash
            ON store_documents (tenant_id, sha256) WHERE deleted = 0
        """,
        # The claim's scan: one tenant's claimable rows, oldest first.
        """
        CREATE INDEX store_documents_queue
            ON store_documents (tenant_id, state, created_at, seq)
        """,
        """
        CREATE TABLE store_segments (
            id INTEGER PRIMARY KEY,
            document_id TEXT NOT NULL
                REFERENCES store_documents (id) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            label TEXT NOT NULL,
            body TEXT NOT NULL,
            indexed_text TEXT NOT NULL,
            UNIQUE (document_id, ordinal)
        )
        """,
        """
        CREATE VIRTUAL TABLE store_segments_fts USING fts5(
            indexed_text,
            content='store_segments',
            content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )
        """,
        """
        CREATE TRIGGER store_segments_ai AFTER INSERT ON store_segments BEGIN
            INSERT INTO store_segments_fts (rowid, indexed_text)
                VALUES (new.id, new.indexed_text);
        END
        """,
        """
        CREATE TRIGGER store_segments_ad AFTER DELETE ON store_segments BEGIN
            INSERT INTO store_segments_fts (store_segments_fts, rowid, indexed_text)
                VALUES ('delete', old.id, old.indexed_text);
        END
        """,
        """
        CREATE TRIGGER store_segments_au AFTER UPDATE ON store_segments BEGIN
            INSERT INTO store_segments_fts (store_segments_fts, rowid, indexed_text)
                VALUES ('delete', old.id, old.indexed_text);
            INSERT INTO store_segments_fts (rowid, indexed_text)
                VALUES (new.id, new.indexed_text);
        END
        """,
        """
        CREATE VIEW searchable_segments AS
        SELECT
            s.id AS rowid,
            s.id AS segment_id,
            d.id AS document_id,
            d.tenant_id AS tenant_id,
            d.scope AS scope,
            d.title AS title,
            d.format AS format,
            s.ordinal AS ordinal,
            s.label AS section,
            s.body AS body,
            d.updated_at AS updated_at
        FROM store_segments AS s
        JOIN store_documents AS d ON d.id = s.document_id
        WHERE d.state = 'indexed' AND d.deleted = 0
        """,
    ),
    2: (
        # Every document stored before owners existed was uploaded by hand.
        """
        ALTER TABLE store_documents ADD COLUMN owner_kind TEXT NOT NULL DEFAULT 'uploaded'
            CHECK (owner_kind IN ('uploaded', 'connector'))
        """,
        # A connector-owned document names its connector; an uploaded one names none.
        """
        ALTER TABLE store_documents ADD COLUMN owner_connector TEXT
            CHECK ((owner_kind = 'connector') = (owner_connector IS NOT NULL))
        """,
        # Reserved for in-place editing of extracted text (with ``revision``): the text
        # before the edit, who edited it and why. Unused by any API until that exists.
        "ALTER TABLE store_documents ADD COLUMN previous_content TEXT",
        "ALTER TABLE store_documents ADD COLUMN edited_by TEXT",
        "ALTER TABLE store_documents ADD COLUMN edit_reason TEXT",
        # Who uploaded it (the operator's subject); unknown for documents stored earlier
        # and for a connector's, which its owner names instead.
        "ALTER TABLE store_documents ADD COLUMN uploaded_by TEXT",
        # For a document failed at upload for a safety limit (a zip bomb, an XML entity),
        # which limit it broke: the failure's MALFORMED_DOCUMENT alone does not say.
        "ALTER TABLE store_documents ADD COLUMN failure_breach TEXT",
        # The store's own settings, one row per tenant, changed only by the audited
        # "configure" action; a tenant without a row uses the host's defaults.
        """
        CREATE TABLE store_settings (
            tenant_id TEXT PRIMARY KEY,
            scan_policy TEXT NOT NULL
                CHECK (scan_policy IN ('quarantine', 'reject', 'index_anyway')),
            retain_bytes INTEGER NOT NULL CHECK (retain_bytes IN (0, 1)),
            max_attempts INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
            batch_per_tenant INTEGER NOT NULL CHECK (batch_per_tenant BETWEEN 1 AND 1000),
            revision INTEGER NOT NULL CHECK (revision >= 1),
            updated_at TEXT NOT NULL,
            updated_by TEXT NOT NULL
        )
        """,
    ),
    3: (
        # An action's audit record, held from the action's transaction until the audit
        # sink has it. Not unique by correlation id: two actions on one document share it.
        """
        CREATE TABLE store_audit_outbox (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            correlation_id TEXT NOT NULL,
            record TEXT NOT NULL
        )
        """,
    ),
    4: (
        # Counts the document's claims and is never reset, unlike ``attempts`` (a re-index
        # zeroes those): what a claim's writes are fenced on.
        "ALTER TABLE store_documents ADD COLUMN claim_seq INTEGER NOT NULL DEFAULT 0",
    ),
}


def store_schema_statements(version: int) -> tuple[str, ...]:
    """The DDL that brings the store's schema from ``version - 1`` to ``version``.

    Raises:
        KeyError: no such version.
    """
    return _MIGRATIONS[version]


def store_schema_version(connection: sqlite3.Connection) -> int:
    """Return the schema version recorded in the store (0 when none was ever applied)."""
    return recorded_version(connection, _VERSION_TABLE)


def apply_store_schema(connection: sqlite3.Connection) -> int:
    """Bring the store's schema to ``STORE_SCHEMA_VERSION`` in one transaction; return the version.

    Idempotent: migrations already recorded are skipped. The connection must be in
    autocommit mode (``isolation_level=None``) and writable.

    Raises:
        RuntimeError: if the store was created by a newer ESRA (its version is higher).
        sqlite3.Error: if the DDL fails (nothing is applied).
    """
    return apply_migrations(
        connection,
        version_table=_VERSION_TABLE,
        migrations=_MIGRATIONS,
        target=STORE_SCHEMA_VERSION,
        subject="store's",
    )
