"""SqliteDocumentRepository: the internal document store on one SQLite file, no server.

The embedded default of the ``DocumentRepository`` port. It owns its database file and opens
it writable (unlike ``SqliteFts5Provider``, which only ever reads customer databases): WAL
journal, so the provider's read-only connections search while ingestion writes; a busy
timeout, so concurrent writers wait rather than fail.

Queue rules, each enforced in SQL:

- a claim is one ``BEGIN IMMEDIATE`` transaction running ``UPDATE … WHERE seq IN (SELECT …
  ORDER BY created_at, seq LIMIT :n) RETURNING …``: it takes the write lock first, so two
  workers (threads or processes) can never claim the same row, and it increments
  ``attempts`` as it hands the bytes over;
- heartbeat, complete and fail are ``UPDATE``s fenced to ``(tenant, worker, attempt,
  claim_seq)`` in the Processing state; a stale owner's statement matches no row and
  changes nothing. ``claim_seq`` is what makes the fence unique: every claim increments it
  and nothing resets it, whereas a re-index resets ``attempts`` and one worker process
  claims under one worker id;
- completion replaces the document's segments in the same transaction (the FTS5 index
  follows through triggers), and drops the original bytes only when the store does not
  retain them — a failure never drops them;
- a delete erases the document's content (its hash too) with the flag and moves
  ``claim_seq``: the connection's ``secure_delete`` zeroes what it frees, an FTS5
  ``optimize`` drops the terms FTS5 would otherwise keep until a merge, and a truncating WAL
  checkpoint removes the older frames (``soft_delete``).

An operator's release, reindex or delete, an upload's ``add`` and a settings change's
``save_configuration`` given its audit record inserts it into ``store_audit_outbox`` in the
action's transaction. ``claim_audit`` hands the oldest held record to one forwarder at a time
across the processes on the file, under an exclusive ``flock`` on
``<database>-store-outbox-lock`` beside it (taken without waiting, released by the kernel with
a process that dies), as ``SqliteConfigStore``'s outbox does; the record is deleted in a
short write once the audit sink has it.

Every statement's values are bound parameters. Timestamps are stored as UTC ISO-8601 text
with microseconds, which sorts and compares in time order.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from esra.core.audit import AuditRecord, record_document
from esra.core.codes import DocumentRefusal
from esra.core.docstore import (
    REMEDIES,
    UPLOADED,
    AcceptedUpload,
    Breach,
    Claim,
    ConfigurableSettings,
    DocumentOwner,
    DocumentPage,
    DocumentRefusedError,
    DocumentSearch,
    DocumentState,
    Finding,
    IndexedContent,
    QueueStats,
    StoreConfiguration,
    StoredDocument,
    claimed,
    findings_json,
    remedy_for,
    stored_document,
    timestamp,
)
from esra.sql import SearchTerms
from esra.sqlite._audit_outbox import OutboxClaim
from esra.sqlite._dedicated_connection import DedicatedConnection
from esra.sqlite._docstore_schema import apply_store_schema
from esra.sqlite._fulltext import fts5_match_expression

__all__ = ["SqliteDocumentRepository"]

_EXHAUSTED = DocumentRefusal.MALFORMED_DOCUMENT

# Metadata columns, named as StoredDocument's attributes (esra.core._docstore.document_rows
# reads them by name); the bytes are never read with them.
_COLUMNS = (
    "id, tenant_id, title, format, sha256, size, scope, state, attempts, created_at, "
    "updated_at, revision, segment_count, failure, remedy, findings, "
    "original IS NOT NULL AS bytes_retained, deleted, released_by, owner_kind, owner_connector, "
    "uploaded_by, failure_breach"
)
_OWNED = (
    "id = :id AND tenant_id = :tenant AND state = 'processing' "
    "AND worker_id = :worker AND attempts = :attempt AND claim_seq = :claim_seq"
)
_CLAIMABLE = (
    "tenant_id = :tenant AND deleted = 0 AND attempts < :max_attempts "
    "AND original IS NOT NULL "
    "AND (state = 'pending' OR (state = 'processing' AND lease_until <= :now))"
)


def _hold(connection: sqlite3.Connection, record: AuditRecord | None) -> None:
    """Insert ``record`` into the audit outbox (in the caller's transaction)."""
    if record is not None:
        connection.execute(
            "INSERT INTO store_audit_outbox (correlation_id, record) VALUES (?, ?)",
            (
                record.correlation_id,
                json.dumps(record_document(record), sort_keys=True, ensure_ascii=False),
            ),
        )


def _merge_full_text_index(connection: sqlite3.Connection) -> None:
    """Merge the FTS5 index into one segment, dropping deleted rows' terms from it."""
    connection.execute("INSERT INTO store_segments_fts (store_segments_fts) VALUES ('optimize')")


def _truncate_wal(connection: sqlite3.Connection) -> None:
    """Copy the WAL into the database and truncate it to nothing (old frames included)."""
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _ts(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


class SqliteDocumentRepository:
    """The ``DocumentRepository`` port over one SQLite file.

    Args:
        database: path of the store's own database file (created if absent).
        retain_bytes: keep original bytes once a document is Indexed or Quarantined; when
            False they are dropped then (a Failed document always keeps them).

    Call ``initialize()`` once (it applies the schema idempotently) before use, and
    ``close()`` when done. All statements run on one dedicated thread over one connection;
    other processes may open the same file, and ``BEGIN IMMEDIATE`` serializes writers.
    """

    def __init__(self, database: str | os.PathLike[str], *, retain_bytes: bool = True) -> None:
        self._retain = retain_bytes
        self._db = DedicatedConnection(
            database,
            thread_name="esra-docstore",
            # secure_delete: freed cells and pages are zeroed, so an erased document's
            # content is not left in the file's free space (or in the WAL's new frames).
            pragmas=("PRAGMA foreign_keys = ON", "PRAGMA secure_delete = ON"),
        )
        # The outbox's claim across processes (a lock file beside the database).
        self._claims = OutboxClaim(self._db, "store_audit_outbox", "store-outbox-lock")

    @property
    def path(self) -> Path:
        """The database file (what a store source's provider opens read-only)."""
        return self._db.path

    # -- plumbing --------------------------------------------------------------------------

    async def initialize(self) -> int:
        """Apply the store schema (idempotent); return the schema version now recorded."""
        return await self._db.run(apply_store_schema)

    async def close(self) -> None:
        """Close the connection once queued work has finished, and stop the thread."""
        await self._db.close()

    async def ping(self) -> None:
        """Read the database file (for the host's readiness check); raises if it cannot."""
        await self._db.ping()

    @staticmethod
    def _get(
        connection: sqlite3.Connection, tenant_id: str, document_id: str
    ) -> StoredDocument | None:
        row = connection.execute(
            f"SELECT {_COLUMNS} FROM store_documents WHERE id = ? AND tenant_id = ?",  # noqa: S608 - constant column list
            (document_id, tenant_id),
        ).fetchone()
        return stored_document(row) if row is not None else None

    # -- the port --------------------------------------------------------------------------

    async def add(
        self,
        tenant_id: str,
        upload: AcceptedUpload,
        *,
        scope: str,
        now: datetime,
        owner: DocumentOwner = UPLOADED,
        uploaded_by: str | None = None,
        audit: Callable[[StoredDocument], AuditRecord] | None = None,
    ) -> StoredDocument:
        """Persist a Pending document with its bytes, owned by ``owner``; refuse a duplicate
        hash in the tenant. An upload with a ``breach`` is inserted Failed, naming it.

        ``audit``'s record of the stored document is held in the same transaction.

        Raises:
            DocumentRefusedError: ``DUPLICATE_DOCUMENT``, ``detail`` naming the existing title.
        """
        document_id = uuid.uuid4().hex
        failure = DocumentRefusal.MALFORMED_DOCUMENT if upload.breach is not None else None
        state = DocumentState.FAILED if failure is not None else DocumentState.PENDING

        def insert(connection: sqlite3.Connection) -> StoredDocument:
            existing = connection.execute(
                "SELECT title FROM store_documents "
                "WHERE tenant_id = ? AND sha256 = ? AND deleted = 0",
                (tenant_id, upload.sha256),
            ).fetchone()
            if existing is not None:
                raise DocumentRefusedError(
                    DocumentRefusal.DUPLICATE_DOCUMENT, detail=existing["title"]
                )
            connection.execute(
                "INSERT INTO store_documents (id, tenant_id, title, format, sha256, size, "
                "scope, state, attempts, created_at, updated_at, original, owner_kind, "
                "owner_connector, uploaded_by, failure, failure_breach, remedy) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    document_id,
                    tenant_id,
                    upload.display_name,
                    upload.format.value,
                    upload.sha256,
                    len(upload.data),
                    scope,
                    state.value,
                    _ts(now),
                    _ts(now),
                    upload.data,
                    owner.kind.value,
                    owner.connector,
                    uploaded_by,
                    failure.value if failure is not None else None,
                    upload.breach.value if upload.breach is not None else None,
                    remedy_for(failure, upload.breach) if failure is not None else None,
                ),
            )
            stored = self._get(connection, tenant_id, document_id)
            assert stored is not None
            if audit is not None:
                _hold(connection, audit(stored))
            return stored

        return await self._db.write(insert)

    async def tenants_with_work(self, *, now: datetime) -> list[str]:
        """Tenants with a Pending document, or a Processing one whose lease expired."""

        def query(connection: sqlite3.Connection) -> list[str]:
            rows = connection.execute(
                "SELECT DISTINCT tenant_id FROM store_documents WHERE deleted = 0 "
                "AND (state = 'pending' OR (state = 'processing' AND lease_until <= ?)) "
                "ORDER BY tenant_id",
                (_ts(now),),
            ).fetchall()
            return [str(r["tenant_id"]) for r in rows]

        return await self._db.run(query)

    async def claim(
        self,
        tenant_id: str,
        *,
        worker_id: str,
        limit: int,
        lease_s: float,
        max_attempts: int,
        now: datetime,
    ) -> list[Claim]:
        """Claim up to ``limit`` claimable documents of one tenant, oldest first, atomically."""
        lease_until = now + timedelta(seconds=lease_s)
        params = {
            "tenant": tenant_id,
            "worker": worker_id,
            "limit": max(0, limit),
            "max_attempts": max_attempts,
            "now": _ts(now),
            "lease": _ts(lease_until),
        }

        def take(connection: sqlite3.Connection) -> list[Claim]:
            rows = connection.execute(
                "UPDATE store_documents SET state = 'processing', attempts = attempts + 1, "  # noqa: S608 - constant predicate
                "claim_seq = claim_seq + 1, "
                "worker_id = :worker, lease_until = :lease, updated_at = :now "
                f"WHERE seq IN (SELECT seq FROM store_documents WHERE {_CLAIMABLE} "
                "ORDER BY created_at, seq LIMIT :limit) "
                "RETURNING seq, id, attempts, claim_seq, title, format, original AS data, "
                "created_at",
                params,
            ).fetchall()
            # RETURNING follows no order: restore the queue's.
            rows.sort(key=lambda r: (r["created_at"], r["seq"]))
            return [
                claimed(r, tenant_id=tenant_id, worker_id=worker_id, lease_until=lease_until)
                for r in rows
            ]

        return await self._db.write(take)

    @staticmethod
    def _owner(claim: Claim) -> dict[str, Any]:
        return {
            "id": claim.document_id,
            "tenant": claim.tenant_id,
            "worker": claim.worker_id,
            "attempt": claim.attempt,
            "claim_seq": claim.claim_seq,
        }

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        """Extend the lease while the claim still owns the document; return whether it does."""
        params = {**self._owner(claim), "lease": _ts(now + timedelta(seconds=lease_s))}

        def extend(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                f"UPDATE store_documents SET lease_until = :lease WHERE {_OWNED}",  # noqa: S608 - constant predicate
                params,
            )
            return cursor.rowcount == 1

        return await self._db.write(extend)

    async def complete(self, claim: Claim, content: IndexedContent, *, now: datetime) -> bool:
        """Store text segments and the final state, only if the claim still owns it."""
        params = {
            **self._owner(claim),
            "state": content.state.value,
            "findings": findings_json(content.findings),
            "segments": len(content.segments),
            "retain": 1 if self._retain and content.retain_bytes else 0,
            "now": _ts(now),
        }
        segments = [
            (claim.document_id, s.ordinal, s.label, s.body, s.indexed) for s in content.segments
        ]

        def store(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "UPDATE store_documents SET state = :state, findings = :findings, "  # noqa: S608 - constant predicate
                "segment_count = :segments, revision = revision + 1, failure = NULL, "
                "failure_breach = NULL, remedy = NULL, worker_id = NULL, lease_until = NULL, "
                "updated_at = :now, "
                "original = CASE WHEN :retain THEN original ELSE NULL END "
                f"WHERE {_OWNED}",
                params,
            )
            if cursor.rowcount != 1:
                return False
            connection.execute(
                "DELETE FROM store_segments WHERE document_id = ?", (claim.document_id,)
            )
            connection.executemany(
                "INSERT INTO store_segments (document_id, ordinal, label, body, indexed_text) "
                "VALUES (?, ?, ?, ?, ?)",
                segments,
            )
            return True

        return await self._db.write(store)

    async def fail(
        self,
        claim: Claim,
        refusal: DocumentRefusal,
        *,
        retry: bool,
        now: datetime,
        findings: tuple[Finding, ...] = (),
        breach: Breach | None = None,
    ) -> bool:
        """Fail the claim's document (or return it to Pending when ``retry``), fenced.

        The original bytes are kept whatever the retention setting: re-extraction is a
        failed document's only recovery.
        """
        params = {
            **self._owner(claim),
            "state": (DocumentState.PENDING if retry else DocumentState.FAILED).value,
            "failure": refusal.value,
            "breach": breach.value if breach is not None else None,
            "remedy": remedy_for(refusal, breach),
            "findings": findings_json(findings),
            "now": _ts(now),
        }

        def mark(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "UPDATE store_documents SET state = :state, failure = :failure, "  # noqa: S608 - constant predicate
                "failure_breach = :breach, remedy = :remedy, findings = :findings, "
                f"worker_id = NULL, lease_until = NULL, updated_at = :now WHERE {_OWNED}",
                params,
            )
            return cursor.rowcount == 1

        return await self._db.write(mark)

    async def fail_exhausted(self, tenant_id: str, *, max_attempts: int, now: datetime) -> int:
        """Fail the tenant's documents at the attempt ceiling that no claim holds (a lapsed
        lease, or Pending above a lowered ceiling); return how many (``max_attempts`` is the
        tenant's own; other tenants may share this file)."""
        params = {
            "tenant": tenant_id,
            "max_attempts": max_attempts,
            "failure": _EXHAUSTED.value,
            "remedy": REMEDIES[_EXHAUSTED],
            "now": _ts(now),
        }

        def sweep(connection: sqlite3.Connection) -> int:
            cursor = connection.execute(
                "UPDATE store_documents SET state = 'failed', failure = :failure, "
                "failure_breach = NULL, remedy = :remedy, worker_id = NULL, lease_until = NULL, "
                "updated_at = :now "
                "WHERE tenant_id = :tenant AND attempts >= :max_attempts "
                "AND ((state = 'pending' AND deleted = 0) "
                "OR (state = 'processing' AND lease_until <= :now))",
                params,
            )
            return cursor.rowcount

        return await self._db.write(sweep)

    async def get(self, tenant_id: str, document_id: str) -> StoredDocument | None:
        """One document's metadata (soft-deleted ones included, flagged)."""
        return await self._db.run(lambda c: self._get(c, tenant_id, document_id))

    async def list(
        self, tenant_id: str, *, states: Collection[DocumentState] | None = None
    ) -> list[StoredDocument]:
        """Non-deleted documents of the tenant in every state (or the given ones), newest first."""
        wanted = None if states is None else [DocumentState(s).value for s in states]
        if wanted is not None and not wanted:
            return []

        def query(connection: sqlite3.Connection) -> list[StoredDocument]:
            sql = f"SELECT {_COLUMNS} FROM store_documents WHERE tenant_id = ? AND deleted = 0"  # noqa: S608 - constant column list
            params: list[object] = [tenant_id]
            if wanted is not None:
                sql += f" AND state IN ({', '.join('?' for _ in wanted)})"
                params.extend(wanted)
            sql += " ORDER BY created_at DESC, seq DESC"
            return [stored_document(r) for r in connection.execute(sql, params).fetchall()]

        return await self._db.run(query)

    async def counts(self, tenant_id: str) -> Mapping[DocumentState, int]:
        """Store-wide counts per state (non-deleted), every state present."""

        def query(connection: sqlite3.Connection) -> dict[DocumentState, int]:
            counts = dict.fromkeys(DocumentState, 0)
            rows = connection.execute(
                "SELECT state, count(*) AS n FROM store_documents "
                "WHERE tenant_id = ? AND deleted = 0 GROUP BY state",
                (tenant_id,),
            ).fetchall()
            for row in rows:
                counts[DocumentState(row["state"])] = int(row["n"])
            return counts

        return await self._db.run(query)

    async def queue_stats(self, tenant_id: str) -> QueueStats:
        """The tenant's live Pending documents: how many, and the oldest ``updated_at``.

        Timestamps are fixed-width UTC ISO text, so ``min`` over the text is the earliest.
        """

        def query(connection: sqlite3.Connection) -> QueueStats:
            row = connection.execute(
                "SELECT count(*) AS n, min(updated_at) AS oldest FROM store_documents "
                "WHERE tenant_id = ? AND deleted = 0 AND state = 'pending'",
                (tenant_id,),
            ).fetchone()
            oldest = row["oldest"]
            return QueueStats(
                waiting=int(row["n"]), oldest_queued_at=timestamp(oldest) if oldest else None
            )

        return await self._db.run(query)

    async def search_documents(self, tenant_id: str, query: DocumentSearch) -> DocumentPage:
        """Live documents matching ``query``, every state, newest first by ``(created_at, id)``.

        The text matches the title (``instr`` over ASCII-folded ``lower``) or, through the
        FTS5 index retrieval searches, a segment holding every word: the MATCH string is the
        provider's own (``fts5_match_expression``, each word a quoted FTS5 string) and one
        bound value, so FTS5 syntax in the text is only ever searched for.
        """
        sql, params = _search_statement(tenant_id, query)

        def run(connection: sqlite3.Connection) -> DocumentPage:
            rows = connection.execute(sql, params).fetchall()
            return DocumentPage.of([stored_document(r) for r in rows], query.limit)

        return await self._db.run(run)

    async def release(
        self,
        tenant_id: str,
        document_id: str,
        *,
        operator: str,
        now: datetime,
        audit: Callable[[StoredDocument], AuditRecord] | None = None,
    ) -> StoredDocument | None:
        """Move a Quarantined document to Indexed, recording the operator; None otherwise.

        ``audit``'s record of the released document is held in the same transaction."""

        def move(connection: sqlite3.Connection) -> StoredDocument | None:
            cursor = connection.execute(
                "UPDATE store_documents SET state = 'indexed', released_by = ?, "
                "released_at = ?, updated_at = ? "
                "WHERE id = ? AND tenant_id = ? AND deleted = 0 AND state = 'quarantined'",
                (operator, _ts(now), _ts(now), document_id, tenant_id),
            )
            if not cursor.rowcount:
                return None
            released = self._get(connection, tenant_id, document_id)
            if released is not None and audit is not None:
                _hold(connection, audit(released))
            return released

        return await self._db.write(move)

    async def reindex(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> StoredDocument | None:
        """Return a document with retained bytes to Pending with attempts reset; None otherwise.

        A document a worker holds (Processing) is not pulled from under it. ``audit`` is
        held in the same transaction when the document is requeued.
        """

        def requeue(connection: sqlite3.Connection) -> StoredDocument | None:
            cursor = connection.execute(
                "UPDATE store_documents SET state = 'pending', attempts = 0, updated_at = ? "
                "WHERE id = ? AND tenant_id = ? AND deleted = 0 "
                "AND original IS NOT NULL AND state <> 'processing'",
                (_ts(now), document_id, tenant_id),
            )
            if not cursor.rowcount:
                return None
            _hold(connection, audit)
            return self._get(connection, tenant_id, document_id)

        return await self._db.write(requeue)

    async def soft_delete(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> bool:
        """Mark the document deleted and erase its content, leaving a tombstone row.

        One transaction flags the row, empties its content columns (original bytes, the
        content hash, findings, the reserved edit columns), deletes its segments (the FTS5
        index follows through the trigger) and moves ``claim_seq``, so a worker extracting it
        cannot write anything back; ``audit`` is held in it. The hash's entry in the
        duplicate rule's partial index leaves with the flag, and ``secure_delete`` zeroes it.
        When segments were deleted, the same transaction optimizes the FTS5 index: FTS5
        records a deletion as a marker in a new index segment and keeps the terms in the old
        one until a merge, and only a full merge is sure to reach the segment holding them
        (its cost grows with the whole index).
        After the commit the WAL is checkpointed and truncated: its older frames (the
        upload's, the extraction's) hold the content until they are overwritten.

        With ``secure_delete`` on (this connection's pragma) every freed cell and page is
        zeroed, so neither the free pages of the file nor the WAL keeps the content. When
        another connection holds a read snapshot, the truncation waits for it up to the busy
        timeout and otherwise leaves the frames to the next checkpoint.
        """

        def erase(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "UPDATE store_documents SET deleted = 1, deleted_at = :now, updated_at = :now, "
                "original = NULL, sha256 = '', findings = '[]', segment_count = 0, "
                "previous_content = NULL, edit_reason = NULL, "
                "claim_seq = claim_seq + 1, worker_id = NULL, lease_until = NULL "
                "WHERE id = :id AND tenant_id = :tenant AND deleted = 0",
                {"now": _ts(now), "id": document_id, "tenant": tenant_id},
            )
            if cursor.rowcount != 1:
                return False
            segments = connection.execute(
                "DELETE FROM store_segments WHERE document_id = ?", (document_id,)
            )
            if segments.rowcount:
                _merge_full_text_index(connection)
            _hold(connection, audit)
            return True

        if not await self._db.write(erase):
            return False
        await self._db.run(_truncate_wal)
        return True

    # -- the audit outbox ------------------------------------------------------------------

    async def pending_audit(self) -> builtins.list[AuditRecord]:
        """Every held audit record, every tenant's, in the order the actions were applied
        (rows set aside, or this version cannot decode, left out)."""
        return await self._db.run(self._claims.pending)

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the oldest held record with ``correlation_id`` (the audit sink has it)."""

        def settle(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM store_audit_outbox WHERE seq = "
                "(SELECT min(seq) FROM store_audit_outbox WHERE correlation_id = ?)",
                (correlation_id,),
            )

        await self._db.write(settle)

    def claim_audit(self) -> AbstractAsyncContextManager[AuditRecord | None]:
        """The oldest held record while the block runs, deleted when it completes (``None``:
        nothing held, or another process or handle is forwarding)."""
        return self._claims.claim()

    async def original(self, tenant_id: str, document_id: str) -> bytes | None:
        """The retained original bytes (authorization is the caller's: ESRA_DATA_MANAGE)."""

        def query(connection: sqlite3.Connection) -> bytes | None:
            row = connection.execute(
                "SELECT original FROM store_documents "
                "WHERE id = ? AND tenant_id = ? AND deleted = 0",
                (document_id, tenant_id),
            ).fetchone()
            return (
                bytes(row["original"]) if row is not None and row["original"] is not None else None
            )

        return await self._db.run(query)

    async def text(
        self, tenant_id: str, document_id: str, *, scopes: Collection[str]
    ) -> str | None:
        """The full text of an Indexed, non-deleted document within ``scopes``, for fetch.

        Rebuilt from the segments in ordinal order: their bodies partition the text exactly.
        """
        wanted = sorted(set(scopes))
        if not wanted:
            return None

        def query(connection: sqlite3.Connection) -> str | None:
            placeholders = ", ".join("?" for _ in wanted)
            visible = connection.execute(
                "SELECT 1 FROM store_documents WHERE id = ? AND tenant_id = ? "  # noqa: S608 - placeholders only
                f"AND state = 'indexed' AND deleted = 0 AND scope IN ({placeholders})",
                (document_id, tenant_id, *wanted),
            ).fetchone()
            if visible is None:
                return None
            rows = connection.execute(
                "SELECT body FROM store_segments WHERE document_id = ? ORDER BY ordinal",
                (document_id,),
            ).fetchall()
            return "".join(r["body"] for r in rows)

        return await self._db.run(query)

    async def load_configuration(self, tenant_id: str) -> StoreConfiguration | None:
        """The tenant's configured store settings, or None if it never configured them."""

        def query(connection: sqlite3.Connection) -> StoreConfiguration | None:
            row = connection.execute(
                "SELECT scan_policy, retain_bytes, max_attempts, batch_per_tenant, revision, "
                "updated_at, updated_by FROM store_settings WHERE tenant_id = ?",
                (tenant_id,),
            ).fetchone()
            return StoreConfiguration.from_row(row) if row is not None else None

        return await self._db.run(query)

    async def save_configuration(
        self,
        tenant_id: str,
        settings: ConfigurableSettings,
        *,
        expected_revision: int,
        by: str,
        now: datetime,
        audit: Callable[[StoreConfiguration], AuditRecord] | None = None,
    ) -> StoreConfiguration | None:
        """Store ``settings`` as the next revision if the stored one is ``expected_revision``.

        One statement decides: an ``INSERT … ON CONFLICT DO NOTHING`` for the first revision,
        an ``UPDATE … WHERE revision = ?`` after it. ``audit``'s record of the stored revision
        is held in the same transaction.
        """
        params = {
            "tenant": tenant_id,
            "policy": settings.scan_policy.value,
            "retain": 1 if settings.retain_bytes else 0,
            "attempts": settings.max_attempts,
            "batch": settings.batch_per_tenant,
            "expected": expected_revision,
            "now": _ts(now),
            "by": by,
        }

        def write(connection: sqlite3.Connection) -> StoreConfiguration | None:
            if expected_revision == 0:
                cursor = connection.execute(
                    "INSERT INTO store_settings (tenant_id, scan_policy, retain_bytes, "
                    "max_attempts, batch_per_tenant, revision, updated_at, updated_by) "
                    "VALUES (:tenant, :policy, :retain, :attempts, :batch, 1, :now, :by) "
                    "ON CONFLICT (tenant_id) DO NOTHING",
                    params,
                )
            else:
                cursor = connection.execute(
                    "UPDATE store_settings SET scan_policy = :policy, retain_bytes = :retain, "
                    "max_attempts = :attempts, batch_per_tenant = :batch, "
                    "revision = revision + 1, updated_at = :now, updated_by = :by "
                    "WHERE tenant_id = :tenant AND revision = :expected",
                    params,
                )
            if cursor.rowcount != 1:
                return None
            saved = StoreConfiguration(
                settings, revision=expected_revision + 1, updated_at=now, updated_by=by
            )
            if audit is not None:
                _hold(connection, audit(saved))
            return saved

        return await self._db.write(write)


def _search_statement(tenant_id: str, query: DocumentSearch) -> tuple[str, list[object]]:
    """The management search as SQL text built from constants, and its bound values."""
    where = ["tenant_id = ?", "deleted = 0"]
    params: list[object] = [tenant_id]
    if query.states:
        states = sorted(state.value for state in query.states)
        where.append(f"state IN ({', '.join('?' for _ in states)})")
        params.extend(states)
    if query.scope is not None:
        where.append("scope = ?")
        params.append(query.scope)
    if query.formats:
        formats = sorted(document_format.value for document_format in query.formats)
        where.append(f"format IN ({', '.join('?' for _ in formats)})")
        params.extend(formats)
    if query.uploader is not None:
        where.append("uploaded_by = ?")
        params.append(query.uploader)
    if query.uploaded_since is not None:
        where.append("created_at >= ?")
        params.append(_ts(query.uploaded_since))
    if query.uploaded_until is not None:
        where.append("created_at < ?")
        params.append(_ts(query.uploaded_until))
    if query.cursor is not None:
        at = _ts(query.cursor.created_at)
        where.append("(created_at < ? OR (created_at = ? AND id < ?))")
        params.extend((at, at, query.cursor.document_id))
    if query.text is not None:
        text = ["instr(lower(title), lower(?)) > 0"]
        params.append(query.text)
        if query.words:
            text.append(
                "id IN (SELECT s.document_id FROM store_segments AS s "
                "JOIN store_segments_fts ON store_segments_fts.rowid = s.id "
                "WHERE store_segments_fts MATCH ?)"
            )
            params.append(fts5_match_expression(SearchTerms(required=query.words)))
        where.append(f"({' OR '.join(text)})")
    params.append(query.limit + 1)
    sql = (
        f"SELECT {_COLUMNS} FROM store_documents WHERE {' AND '.join(where)} "  # noqa: S608 - constant fragments and placeholders only
        "ORDER BY created_at DESC, id DESC LIMIT ?"
    )
    return sql, params
