"""SqliteDocumentRepository: the repository contract, plus what only the SQLite store has."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from esra.core._docstore.model import DocumentState, IndexedContent, StoredSegment
from esra.core._docstore.repository import DocumentRepository
from esra.core.codes import DocumentRefusal
from esra.core.testing.docstore_contract import T0, DocumentRepositoryContract, contract_upload
from esra.core.testing.docstore_ownership_contract import VersionOneDocument
from esra.sqlite import (
    STORE_SCHEMA_VERSION,
    SqliteDocumentRepository,
    apply_store_schema,
    store_schema_version,
)
from tests.sqlite._docstore_v1 import create_version_1_store

TENANT = "tenant-a"


async def _open(path: Path, *, retain_bytes: bool = True) -> SqliteDocumentRepository:
    repository = SqliteDocumentRepository(path, retain_bytes=retain_bytes)
    await repository.initialize()
    return repository


class TestSqliteRepositoryContract(DocumentRepositoryContract):
    """The SQLite store honours every rule of the port."""

    async def make_repository(self, tmp_path: Path, *, retain_bytes: bool) -> DocumentRepository:
        """A fresh store file under ``tmp_path``, schema applied."""
        return await _open(tmp_path / "store.db", retain_bytes=retain_bytes)

    async def make_twin(self, repository: DocumentRepository) -> DocumentRepository:
        """Another connection on ``repository``'s file (as another process opens it)."""
        assert isinstance(repository, SqliteDocumentRepository)
        return await _open(repository.path)

    async def make_migrated_repository(
        self, tmp_path: Path, legacy: VersionOneDocument
    ) -> DocumentRepository:
        """A version-1 store file holding ``legacy``, migrated by ``initialize()``."""
        create_version_1_store(tmp_path / "store.db", legacy)
        return await _open(tmp_path / "store.db")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteDocumentRepository]:
    """A fresh, initialised store, closed after the test."""
    repository = await _open(tmp_path / "store.db")
    yield repository
    await repository.close()


def _read(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return [tuple(row) for row in connection.execute(sql, params).fetchall()]
    finally:
        connection.close()


def _content(*bodies: str, state: DocumentState = DocumentState.INDEXED) -> IndexedContent:
    segments = tuple(
        StoredSegment(ordinal=i, label="", body=b, indexed=b) for i, b in enumerate(bodies)
    )
    return IndexedContent(text="".join(bodies), segments=segments, findings=(), state=state)


async def _settle(
    store: SqliteDocumentRepository, name: str, body: str, state: DocumentState | None
) -> str:
    """Add a document and leave it Pending (None), Failed, or completed in ``state``."""
    document = await store.add(TENANT, contract_upload(name, body), scope="all", now=T0)
    if state is None:
        return document.id
    (claim,) = await store.claim(TENANT, worker_id="w", limit=1, lease_s=60, max_attempts=3, now=T0)
    if state is DocumentState.FAILED:
        await store.fail(claim, DocumentRefusal.MALFORMED_DOCUMENT, retry=False, now=T0)
    else:
        await store.complete(claim, _content(body, state=state), now=T0)
    return document.id


async def test_the_schema_is_applied_idempotently_with_its_version(
    store: SqliteDocumentRepository,
) -> None:
    """Initialising again changes nothing; the version is recorded once; the journal is WAL."""
    assert await store.initialize() == STORE_SCHEMA_VERSION
    assert await store.initialize() == STORE_SCHEMA_VERSION
    versions = _read(store.path, "SELECT version FROM store_schema ORDER BY version")
    assert versions == [(v,) for v in range(1, STORE_SCHEMA_VERSION + 1)]
    assert _read(store.path, "PRAGMA journal_mode") == [("wal",)]
    views = _read(store.path, "SELECT name FROM sqlite_master WHERE type = 'view'")
    assert views == [("searchable_segments",)]


def test_a_store_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    """A recorded version above this release's is an error, not a silent downgrade."""
    connection = sqlite3.connect(tmp_path / "store.db", isolation_level=None)
    try:
        apply_store_schema(connection)
        connection.execute("INSERT INTO store_schema VALUES (?, 'later')", (99,))
        with pytest.raises(RuntimeError, match="newer"):
            apply_store_schema(connection)
        assert store_schema_version(connection) == 99
    finally:
        connection.close()


async def test_original_bytes_live_in_a_blob_column_not_a_file(
    store: SqliteDocumentRepository,
) -> None:
    """Bytes are a column value: no file named after the upload is ever written."""
    upload = contract_upload("../../etc/passwd.txt", "root:x:0:0")
    document = await store.add(TENANT, upload, scope="all", now=T0)
    rows = _read(store.path, "SELECT typeof(original), original FROM store_documents")
    assert rows == [("blob", b"root:x:0:0")]
    names = {p.name for p in store.path.parent.iterdir()}
    assert names <= {"store.db", "store.db-wal", "store.db-shm"}
    assert document.title == "../../etc/passwd.txt"  # display metadata only, never a path


async def test_the_search_view_admits_only_indexed_live_documents(
    store: SqliteDocumentRepository,
) -> None:
    """Pending, Processing, Quarantined, Failed and deleted documents are absent from the view."""
    ids = {
        state: await _settle(store, f"{state}.txt", f"kiwi {state} words", state)
        for state in (DocumentState.INDEXED, DocumentState.QUARANTINED, DocumentState.FAILED)
    }
    deleted = await _settle(store, "deleted.txt", "kiwi deleted words", DocumentState.INDEXED)
    assert await store.soft_delete(TENANT, deleted, now=T0)
    processing = await _settle(store, "p.txt", "kiwi p", None)
    await store.claim(TENANT, worker_id="w", limit=1, lease_s=60, max_attempts=3, now=T0)
    pending = await _settle(store, "n.txt", "kiwi n", None)
    states = {r[0]: r[1] for r in _read(store.path, "SELECT id, state FROM store_documents")}
    assert (states[processing], states[pending]) == ("processing", "pending")
    visible = {r[0] for r in _read(store.path, "SELECT document_id FROM searchable_segments")}
    assert visible == {ids[DocumentState.INDEXED]}
    await store.release(TENANT, ids[DocumentState.QUARANTINED], operator="op", now=T0)
    visible = {r[0] for r in _read(store.path, "SELECT document_id FROM searchable_segments")}
    assert visible == {ids[DocumentState.INDEXED], ids[DocumentState.QUARANTINED]}


async def test_the_fts_index_follows_re_extraction(store: SqliteDocumentRepository) -> None:
    """Replaced segments leave the FTS5 index; the view's rowid is the FTS rowid."""
    document_id = await _settle(store, "a.txt", "mango papaya", DocumentState.INDEXED)
    match = (
        "SELECT v.document_id FROM searchable_segments AS v JOIN store_segments_fts AS f "
        "ON f.rowid = v.rowid WHERE store_segments_fts MATCH ?"
    )
    assert _read(store.path, match, "papaya") == [(document_id,)]
    await store.reindex(TENANT, document_id, now=T0)
    later = T0 + timedelta(seconds=1)
    (claim,) = await store.claim(
        TENANT, worker_id="w", limit=1, lease_s=60, max_attempts=3, now=later
    )
    assert await store.complete(claim, _content("guava only"), now=later)
    assert _read(store.path, match, "papaya") == []
    assert _read(store.path, match, "guava") == [(document_id,)]
    check = "INSERT INTO store_segments_fts (store_segments_fts) VALUES ('integrity-check')"
    _read(store.path, check)  # raises if the index and its content disagree


async def test_two_connections_never_claim_the_same_document(tmp_path: Path) -> None:
    """Two repositories (two connections, two threads) on one file split the queue exactly."""
    path = tmp_path / "store.db"
    first, second = await _open(path), await _open(path)
    try:
        for i in range(30):
            await first.add(TENANT, contract_upload(f"d{i}.txt", f"doc {i}"), scope="all", now=T0)

        async def drain(repository: SqliteDocumentRepository, worker: str) -> list[str]:
            taken: list[str] = []
            while batch := await repository.claim(
                TENANT, worker_id=worker, limit=3, lease_s=60, max_attempts=3, now=T0
            ):
                taken.extend(c.document_id for c in batch)
            return taken

        a, b = await asyncio.gather(drain(first, "w1"), drain(second, "w2"))
        assert len(a) + len(b) == len(set(a) | set(b)) == 30
    finally:
        await first.close()
        await second.close()
