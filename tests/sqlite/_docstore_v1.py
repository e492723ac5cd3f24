"""A version-1 SQLite document store, written with version 1's own DDL, for migration tests."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from esra.core.testing.docstore_ownership_contract import VersionOneDocument
from esra.sqlite._docstore_schema import store_schema_statements
from esra.sqlite._schema_migrations import apply_migrations

__all__ = ["create_version_1_store"]


def create_version_1_store(database: Path, legacy: VersionOneDocument) -> None:
    """Create ``database`` at schema version 1 holding ``legacy`` and its one segment."""
    with closing(sqlite3.connect(database, isolation_level=None)) as connection:
        apply_migrations(
            connection,
            version_table="store_schema",
            migrations={1: store_schema_statements(1)},
            target=1,
            subject="store's",
        )
        at = legacy.created_at.isoformat(timespec="microseconds")
        connection.execute(
            "INSERT INTO store_documents (id, tenant_id, title, format, sha256, size, scope, "
            "state, attempts, created_at, updated_at, revision, segment_count, findings, "
            "original) VALUES (?, ?, ?, 'txt', ?, ?, ?, 'indexed', 1, ?, ?, ?, 1, '[]', ?)",
            (
                legacy.id,
                legacy.tenant_id,
                legacy.title,
                legacy.sha256,
                len(legacy.data),
                legacy.scope,
                at,
                at,
                legacy.revision,
                legacy.data,
            ),
        )
        connection.execute(
            "INSERT INTO store_segments (document_id, ordinal, label, body, indexed_text) "
            "VALUES (?, 0, ?, ?, ?)",
            (legacy.id, legacy.segment_label, legacy.text, legacy.text),
        )
