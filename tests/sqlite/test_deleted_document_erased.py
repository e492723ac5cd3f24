"""A deleted document's content is gone from the SQLite store's files, not only hidden.

The contract (``DocumentRepositoryContract``) proves what the port shows of an erased
document. These tests read the store's raw files — the database and its write-ahead log — for
a marker that only the deleted document's content held: its original bytes, its segments
(and so the FTS5 index's shadow tables), its scanner findings and the columns reserved for
editing its text — and for its SHA-256 in hex, which the row and the duplicate rule's index
hold. SQLite leaves deleted rows' bytes in free pages and old WAL frames unless
told otherwise, so a row that no query returns may still be read from the file.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from esra.core._docstore.model import DocumentState, IndexedContent, StoredSegment
from esra.core._docstore.scanner import Finding
from esra.core.testing.docstore_contract import T0, contract_upload
from esra.sqlite import SqliteDocumentRepository

TENANT = "tenant-a"
# Lowercase, no English suffix the porter stemmer would strip, and no other term of these
# tests starts with "q": FTS5 stores it whole, not prefix-compressed against a neighbour.
MARKER = "qxzvkw7731jhfd"
_ERASED_BODY = f"Salary table of the wrong contract: {MARKER} {MARKER}. " + "zebra " * 2000
_KEPT_BODY = "Leave policy: twenty-eight days of paid leave."
_FINDING = Finding(rule="instruction_override", start=0, end=20, excerpt=f"ignore {MARKER}")
# What the tombstone held until a delete erased it too: anyone with the file could confirm it.
_ERASED_HASH = hashlib.sha256(_ERASED_BODY.encode()).hexdigest()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteDocumentRepository]:
    repository = SqliteDocumentRepository(tmp_path / "store.db")
    await repository.initialize()
    yield repository
    await repository.close()


def _files_holding(database: Path, needle: str) -> list[str]:
    """Which of the database file and its WAL hold ``needle``, read as bytes from disk."""
    files = (database, database.with_name(database.name + "-wal"))
    return [f.name for f in files if f.exists() and needle.encode() in f.read_bytes()]


def _files_holding_the_marker(database: Path) -> list[str]:
    """Which of the database file and its WAL hold ``MARKER``."""
    return _files_holding(database, MARKER)


def _execute(database: Path, statement: str, *params: object) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(database, isolation_level=None)
    try:
        return [tuple(row) for row in connection.execute(statement, params).fetchall()]
    finally:
        connection.close()


def _content(body: str, *, findings: tuple[Finding, ...] = ()) -> IndexedContent:
    half = len(body) // 2
    segments = (
        StoredSegment(ordinal=0, label="part 1", body=body[:half], indexed=body[:half]),
        StoredSegment(ordinal=1, label="part 2", body=body[half:], indexed=body[half:]),
    )
    state = DocumentState.QUARANTINED if findings else DocumentState.INDEXED
    return IndexedContent(text=body, segments=segments, findings=findings, state=state)


async def _extracted(
    store: SqliteDocumentRepository, name: str, body: str, *, findings: tuple[Finding, ...] = ()
) -> str:
    document = await store.add(TENANT, contract_upload(name, body), scope="all", now=T0)
    (claim,) = await store.claim(TENANT, worker_id="w", limit=1, lease_s=60, max_attempts=3, now=T0)
    assert claim.document_id == document.id
    assert await store.complete(claim, _content(body, findings=findings), now=T0)
    return document.id


async def test_no_byte_of_a_deleted_documents_content_is_left_in_the_files(
    store: SqliteDocumentRepository,
) -> None:
    """Original, segments, FTS5 terms, findings and the reserved edit columns: all erased."""
    kept = await _extracted(store, "handbook.txt", _KEPT_BODY)
    erased = await _extracted(store, "mistake.txt", _ERASED_BODY, findings=(_FINDING,))
    _execute(
        store.path,
        "UPDATE store_documents SET previous_content = ?, edited_by = 'editor', "
        "edit_reason = ? WHERE id = ?",
        f"before the edit: {MARKER}",
        f"replaced {MARKER}",
        erased,
    )
    assert _files_holding_the_marker(store.path)  # the test sees it while it is there
    assert _files_holding(store.path, _ERASED_HASH)

    assert await store.soft_delete(TENANT, erased, now=T0 + timedelta(seconds=5))

    assert _files_holding_the_marker(store.path) == []
    assert _files_holding(store.path, _ERASED_HASH) == []
    assert await store.text(TENANT, kept, scopes={"all"}) == _KEPT_BODY
    match = "SELECT rowid FROM store_segments_fts WHERE store_segments_fts MATCH ?"
    assert len(_execute(store.path, match, "twenty")) == 1
    assert _execute(store.path, match, MARKER) == []
    _execute(
        store.path, "INSERT INTO store_segments_fts (store_segments_fts) VALUES ('integrity-check')"
    )


async def test_a_pending_documents_bytes_are_erased_too(store: SqliteDocumentRepository) -> None:
    """Deleted before any worker reached it: the uploaded bytes still leave the file."""
    document = await store.add(
        TENANT, contract_upload("queued.txt", _ERASED_BODY), scope="all", now=T0
    )
    assert _files_holding_the_marker(store.path)
    assert _files_holding(store.path, _ERASED_HASH)
    assert await store.soft_delete(TENANT, document.id, now=T0)
    assert _files_holding_the_marker(store.path) == []
    assert _files_holding(store.path, _ERASED_HASH) == []
    assert _execute(store.path, "SELECT count(*) FROM store_segments") == [(0,)]


async def test_the_tombstone_row_keeps_who_uploaded_what_and_when(
    store: SqliteDocumentRepository,
) -> None:
    """The row stays: id, title, format, state, deleted flag, timestamps, uploader; its
    content hash is emptied (the column is ``NOT NULL``)."""
    document = await store.add(
        TENANT,
        contract_upload("mistake.txt", _ERASED_BODY),
        scope="all",
        now=T0,
        uploaded_by="operator@corp",
    )
    assert await store.soft_delete(TENANT, document.id, now=T0 + timedelta(seconds=5))
    rows = _execute(
        store.path,
        "SELECT title, format, state, deleted, deleted_at IS NOT NULL, uploaded_by, "
        "original IS NULL, findings, sha256 FROM store_documents WHERE id = ?",
        document.id,
    )
    assert rows == [("mistake.txt", "txt", "pending", 1, 1, "operator@corp", 1, "[]", "")]


async def test_a_re_upload_after_the_delete_is_stored_and_its_own_delete_erases_it_too(
    store: SqliteDocumentRepository,
) -> None:
    """The erased hash frees the duplicate rule's index; the second copy goes the same way."""
    first = await store.add(TENANT, contract_upload("v1.txt", _ERASED_BODY), scope="all", now=T0)
    assert await store.soft_delete(TENANT, first.id, now=T0 + timedelta(seconds=1))
    second = await store.add(
        TENANT, contract_upload("v1-again.txt", _ERASED_BODY), scope="all", now=T0
    )
    assert second.sha256 == _ERASED_HASH
    assert _files_holding(store.path, _ERASED_HASH)
    assert await store.soft_delete(TENANT, second.id, now=T0 + timedelta(seconds=2))
    assert _files_holding(store.path, _ERASED_HASH) == []
    assert _execute(store.path, "SELECT count(*), max(sha256) FROM store_documents") == [(2, "")]
    assert _execute(store.path, "PRAGMA integrity_check") == [("ok",)]
