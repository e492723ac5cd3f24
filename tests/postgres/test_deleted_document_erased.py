"""A deleted document's content is gone from every live row of the PostgreSQL store.

The contract (``DocumentRepositoryContract``) proves what the port shows of an erased
document; these tests read every table of the store's schema for a marker that only the
deleted document's content held: its original bytes, its extracted text, its segments (and
their ``tsvector``), its scanner findings and the columns reserved for editing its text — and
for its SHA-256 in hex, which the tombstone row kept until a delete erased it too.

Dead tuples are out of reach of a query: PostgreSQL keeps the old row versions (and their
TOAST chunks and index entries) on disk until VACUUM reclaims the space, which
docs/document-store.md states. The product path does not VACUUM, so these tests read the
live rows only (the hash's entry in the duplicate rule's unique index is one of those dead
entries until VACUUM).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from esra.core._docstore.model import DocumentState, IndexedContent, StoredSegment
from esra.core._docstore.scanner import Finding
from esra.core.testing.docstore_contract import T0, contract_upload
from esra.postgres import PostgresDocumentRepository, apply_store_schema

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

TENANT = "tenant-a"
MARKER = "qxzvkw7731jhfd"
_ERASED_BODY = f"Salary table of the wrong contract: {MARKER}. " + "zebra " * 2000
_KEPT_BODY = "Leave policy: twenty-eight days of paid leave."
_FINDING = Finding(rule="instruction_override", start=0, end=20, excerpt=f"ignore {MARKER}")
# What the tombstone held until a delete erased it too: anyone with the file could confirm it.
_ERASED_HASH = hashlib.sha256(_ERASED_BODY.encode()).hexdigest()


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[tuple[PostgresDocumentRepository, str]]:
    """A repository over a fresh store schema, and the schema's name (dropped afterwards)."""
    schema = f"esra_test_store_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema, "simple")
    repository = await PostgresDocumentRepository.open(pg_dsn, schema=schema, max_size=2)
    try:
        yield repository, schema
    finally:
        await repository.close()
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


async def _tables_holding_the_marker(dsn: str, schema: str, marker: str = MARKER) -> list[str]:
    """The schema's tables with a live row holding ``marker`` in any column (``bytea``
    included, which a row's JSON shows as hex)."""
    holding = []
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
            (schema,),
        )
        for (table,) in await cursor.fetchall():
            found = await conn.execute(
                sql.SQL(
                    "SELECT count(*) FROM {} AS r WHERE strpos(row_to_json(r)::text, %s) > 0"
                    " OR strpos(row_to_json(r)::text, %s) > 0"
                ).format(sql.Identifier(schema, table)),
                (marker, marker.encode().hex()),
            )
            row = await found.fetchone()
            if row is not None and row[0]:
                holding.append(str(table))
    return holding


def _content(body: str, *, findings: tuple[Finding, ...] = ()) -> IndexedContent:
    half = len(body) // 2
    segments = (
        StoredSegment(ordinal=0, label="part 1", body=body[:half], indexed=body[:half]),
        StoredSegment(ordinal=1, label="part 2", body=body[half:], indexed=body[half:]),
    )
    state = DocumentState.QUARANTINED if findings else DocumentState.INDEXED
    return IndexedContent(text=body, segments=segments, findings=findings, state=state)


async def _extracted(
    repository: PostgresDocumentRepository,
    name: str,
    body: str,
    *,
    findings: tuple[Finding, ...] = (),
) -> str:
    document = await repository.add(TENANT, contract_upload(name, body), scope="all", now=T0)
    (claim,) = await repository.claim(
        TENANT, worker_id="w", limit=1, lease_s=60, max_attempts=3, now=T0
    )
    assert claim.document_id == document.id
    assert await repository.complete(claim, _content(body, findings=findings), now=T0)
    return document.id


async def test_no_live_row_holds_a_deleted_documents_content(
    pg_dsn: str, store: tuple[PostgresDocumentRepository, str]
) -> None:
    """Bytes, text, segments, findings and the reserved edit columns: all erased at once."""
    repository, schema = store
    kept = await _extracted(repository, "handbook.txt", _KEPT_BODY)
    erased = await _extracted(repository, "mistake.txt", _ERASED_BODY, findings=(_FINDING,))
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL(
                "UPDATE {} SET previous_content = %s, edited_by = 'editor', edit_reason = %s"
                " WHERE id = %s"
            ).format(sql.Identifier(schema, "documents")),
            (f"before the edit: {MARKER}", f"replaced {MARKER}", erased),
        )
    assert await _tables_holding_the_marker(pg_dsn, schema) == ["documents", "segments"]
    assert await _tables_holding_the_marker(pg_dsn, schema, _ERASED_HASH) == ["documents"]

    assert await repository.soft_delete(TENANT, erased, now=T0 + timedelta(seconds=5))

    assert await _tables_holding_the_marker(pg_dsn, schema) == []
    assert await _tables_holding_the_marker(pg_dsn, schema, _ERASED_HASH) == []
    assert await repository.text(TENANT, kept, scopes={"all"}) == _KEPT_BODY
    assert [s[2] for s in await repository.segments(TENANT, kept)] == [
        _KEPT_BODY[: len(_KEPT_BODY) // 2],
        _KEPT_BODY[len(_KEPT_BODY) // 2 :],
    ]
    tombstone = await repository.get(TENANT, erased)
    assert tombstone is not None
    assert (tombstone.title, tombstone.deleted, tombstone.segment_count, tombstone.sha256) == (
        "mistake.txt",
        True,
        0,
        "",
    )


async def test_a_pending_documents_bytes_are_erased_too(
    pg_dsn: str, store: tuple[PostgresDocumentRepository, str]
) -> None:
    """Deleted before any worker reached it: the uploaded bytes still leave the row."""
    repository, schema = store
    document = await repository.add(
        TENANT, contract_upload("queued.txt", _ERASED_BODY), scope="all", now=T0
    )
    assert await _tables_holding_the_marker(pg_dsn, schema) == ["documents"]
    assert await _tables_holding_the_marker(pg_dsn, schema, _ERASED_HASH) == ["documents"]
    assert await repository.soft_delete(TENANT, document.id, now=T0)
    assert await _tables_holding_the_marker(pg_dsn, schema) == []
    assert await _tables_holding_the_marker(pg_dsn, schema, _ERASED_HASH) == []


async def test_a_re_upload_after_the_delete_is_stored_and_its_own_delete_erases_it_too(
    pg_dsn: str, store: tuple[PostgresDocumentRepository, str]
) -> None:
    """The erased hash leaves the duplicate rule to the live copy; its delete erases it too."""
    repository, schema = store
    first = await repository.add(
        TENANT, contract_upload("v1.txt", _ERASED_BODY), scope="all", now=T0
    )
    assert await repository.soft_delete(TENANT, first.id, now=T0 + timedelta(seconds=1))
    second = await repository.add(
        TENANT, contract_upload("v1-again.txt", _ERASED_BODY), scope="all", now=T0
    )
    assert second.sha256 == _ERASED_HASH
    assert await _tables_holding_the_marker(pg_dsn, schema, _ERASED_HASH) == ["documents"]
    assert await repository.soft_delete(TENANT, second.id, now=T0 + timedelta(seconds=2))
    assert await _tables_holding_the_marker(pg_dsn, schema, _ERASED_HASH) == []
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        cursor = await conn.execute(
            sql.SQL("SELECT count(*), max(sha256) FROM {}").format(
                sql.Identifier(schema, "documents")
            )
        )
        assert await cursor.fetchall() == [(2, "")]
