"""The SQLite store's version-2 migration: owners and the reserved edit columns, in place."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from esra.core.testing.docstore_ownership_contract import VersionOneDocument
from esra.sqlite._docstore_schema import (
    STORE_SCHEMA_VERSION,
    apply_store_schema,
    store_schema_version,
)
from tests.sqlite._docstore_v1 import create_version_1_store

_RESERVED = ("previous_content", "edited_by", "edit_reason")


def _columns(connection: sqlite3.Connection) -> dict[str, tuple[bool, object]]:
    """Column name → (NOT NULL, default) of ``store_documents``."""
    rows = connection.execute("PRAGMA table_info(store_documents)").fetchall()
    return {str(r[1]): (bool(r[3]), r[4]) for r in rows}


def test_a_version_1_store_migrates_in_place_once(tmp_path: Path) -> None:
    """v1 → v2 adds the owner and reserved columns; the row is kept; a rerun changes nothing."""
    database = tmp_path / "store.db"
    legacy = VersionOneDocument()
    create_version_1_store(database, legacy)
    with closing(sqlite3.connect(database, isolation_level=None)) as connection:
        assert store_schema_version(connection) == 1
        assert "owner_kind" not in _columns(connection)
        assert apply_store_schema(connection) == STORE_SCHEMA_VERSION == 4
        assert apply_store_schema(connection) == STORE_SCHEMA_VERSION
        versions = connection.execute("SELECT version FROM store_schema ORDER BY version")
        assert [v for (v,) in versions] == [1, 2, 3, 4]
        columns = _columns(connection)
        assert columns["owner_kind"] == (True, "'uploaded'")
        assert columns["owner_connector"] == (False, None)
        for column in _RESERVED:
            assert columns[column] == (False, None)
        row = connection.execute(
            "SELECT id, title, sha256, state, revision, original, owner_kind, owner_connector, "
            "previous_content, edited_by, edit_reason FROM store_documents"
        ).fetchall()
        assert row == [
            (
                legacy.id,
                legacy.title,
                legacy.sha256,
                "indexed",
                legacy.revision,
                legacy.data,
                "uploaded",
                None,
                None,
                None,
                None,
            )
        ]
        # The FTS index still finds the migrated segment through the search view.
        found = connection.execute(
            "SELECT v.document_id FROM store_segments_fts JOIN searchable_segments AS v "
            "ON v.rowid = store_segments_fts.rowid WHERE store_segments_fts MATCH 'leave'"
        ).fetchall()
        assert found == [(legacy.id,)]


def test_the_owner_columns_refuse_an_unnamed_or_unknown_owner(tmp_path: Path) -> None:
    """A connector owner must name its connector, an upload names none, no other kind exists."""
    database = tmp_path / "store.db"
    create_version_1_store(database, VersionOneDocument())
    with closing(sqlite3.connect(database, isolation_level=None)) as connection:
        apply_store_schema(connection)
        for kind, connector in (("connector", None), ("uploaded", "sync"), ("robot", "x")):
            with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
                connection.execute(
                    "UPDATE store_documents SET owner_kind = ?, owner_connector = ?",
                    (kind, connector),
                )
        connection.execute(
            "UPDATE store_documents SET owner_kind = 'connector', owner_connector = 'sync'"
        )
