"""InMemoryDocumentRepository: the document store's repository port over Python dicts."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from esra.core._audit.record import AuditRecord
from esra.core._docstore.model import (
    Claim,
    DocumentState,
    IndexedContent,
    StoredDocument,
    StoredSegment,
)
from esra.core._docstore.ownership import UPLOADED, DocumentOwner
from esra.core._docstore.queue_stats import QueueStats
from esra.core._docstore.refusals import REMEDIES, Breach, DocumentRefusedError, remedy_for
from esra.core._docstore.scanner import Finding
from esra.core._docstore.search import (
    DocumentPage,
    DocumentSearch,
    search_words,
    title_contains,
)
from esra.core._docstore.store_configuration import ConfigurableSettings, StoreConfiguration
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["InMemoryDocumentRepository"]


@attrs.define
class _Row:
    document: StoredDocument
    data: bytes | None
    text: str | None = None
    segments: tuple[StoredSegment, ...] = ()
    worker_id: str | None = None
    lease_until: datetime | None = None
    # Counts the document's claims and is never reset (a re-index resets attempts): the fence.
    claim_seq: int = 0


class InMemoryDocumentRepository:
    """Honours every rule of the ``DocumentRepository`` port, in one process.

    ``retain_bytes`` False discards bytes once a document is Indexed or Quarantined (never
    when it fails: re-extraction is a failed document's only recovery).
    """

    def __init__(self, *, retain_bytes: bool = True) -> None:
        self._rows: dict[str, _Row] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self._retain = retain_bytes
        self._configurations: dict[str, StoreConfiguration] = {}
        # The audit outbox: held records in the order the actions were applied.
        self._outbox: list[AuditRecord] = []
        self._claimed = False

    def _update(self, row: _Row, now: datetime, **changes: Any) -> None:
        row.document = attrs.evolve(row.document, updated_at=now, **changes)

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
        """Persist a Pending document owned by ``owner`` (Failed when the upload is a breach);
        refuse a duplicate hash in the tenant. ``audit``'s record of it is held with it."""
        async with self._lock:
            for row in self._rows.values():
                doc = row.document
                if doc.tenant_id == tenant_id and doc.sha256 == upload.sha256 and not doc.deleted:
                    raise DocumentRefusedError(DocumentRefusal.DUPLICATE_DOCUMENT, detail=doc.title)
            document = StoredDocument(
                id=f"doc-{next(self._ids)}",
                tenant_id=tenant_id,
                title=upload.display_name,
                format=upload.format,
                sha256=upload.sha256,
                size=len(upload.data),
                scope=scope,
                state=DocumentState.PENDING,
                attempts=0,
                created_at=now,
                updated_at=now,
                owner=owner,
                uploaded_by=uploaded_by,
            )
            if upload.breach is not None:
                refusal = DocumentRefusal.MALFORMED_DOCUMENT
                document = attrs.evolve(
                    document,
                    state=DocumentState.FAILED,
                    failure=refusal,
                    failure_breach=upload.breach,
                    remedy=remedy_for(refusal, upload.breach),
                )
            # Made before anything is stored: a record that cannot be made stores nothing.
            record = audit(document) if audit is not None else None
            self._rows[document.id] = _Row(document=document, data=upload.data)
            if record is not None:
                self._outbox.append(record)
            return document

    def _claimable(self, row: _Row, now: datetime, max_attempts: int) -> bool:
        doc = row.document
        if doc.deleted or doc.attempts >= max_attempts:
            return False
        if doc.state is DocumentState.PENDING:
            return True
        return doc.state is DocumentState.PROCESSING and (
            row.lease_until is not None and row.lease_until <= now
        )

    async def tenants_with_work(self, *, now: datetime) -> list[str]:
        """Tenants with live Pending or lease-expired Processing documents."""
        async with self._lock:
            tenants = {
                r.document.tenant_id
                for r in self._rows.values()
                if not r.document.deleted
                and (
                    r.document.state is DocumentState.PENDING
                    or (
                        r.document.state is DocumentState.PROCESSING
                        and r.lease_until is not None
                        and r.lease_until <= now
                    )
                )
            }
            return sorted(tenants)

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
        """Claim the oldest claimable documents, incrementing attempts at claim."""
        async with self._lock:
            rows = sorted(
                (
                    r
                    for r in self._rows.values()
                    if r.document.tenant_id == tenant_id
                    and self._claimable(r, now, max_attempts)
                    and r.data is not None
                ),
                key=lambda r: (r.document.created_at, r.document.id),
            )[:limit]
            lease_until = now + timedelta(seconds=lease_s)
            claims = []
            for row in rows:
                attempt = row.document.attempts + 1
                self._update(row, now, state=DocumentState.PROCESSING, attempts=attempt)
                row.worker_id, row.lease_until = worker_id, lease_until
                row.claim_seq += 1
                assert row.data is not None
                claims.append(
                    Claim(
                        document_id=row.document.id,
                        tenant_id=tenant_id,
                        worker_id=worker_id,
                        attempt=attempt,
                        title=row.document.title,
                        format=row.document.format,
                        data=row.data,
                        lease_until=lease_until,
                        claim_seq=row.claim_seq,
                    )
                )
            return claims

    def _owned(self, claim: Claim) -> _Row | None:
        row = self._rows.get(claim.document_id)
        if (
            row is None
            or row.document.tenant_id != claim.tenant_id
            or row.document.state is not DocumentState.PROCESSING
            or row.worker_id != claim.worker_id
            or row.document.attempts != claim.attempt
            or row.claim_seq != claim.claim_seq
        ):
            return None
        return row

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        """Extend the lease if still owned."""
        async with self._lock:
            row = self._owned(claim)
            if row is None:
                return False
            row.lease_until = now + timedelta(seconds=lease_s)
            return True

    async def complete(self, claim: Claim, content: IndexedContent, *, now: datetime) -> bool:
        """Store the content, fenced to the claim."""
        async with self._lock:
            row = self._owned(claim)
            if row is None:
                return False
            row.text, row.segments = content.text, content.segments
            row.worker_id = row.lease_until = None
            if not (self._retain and content.retain_bytes):
                row.data = None
            self._update(
                row,
                now,
                state=content.state,
                findings=content.findings,
                segment_count=len(content.segments),
                revision=row.document.revision + 1,
                failure=None,
                failure_breach=None,
                remedy=None,
                bytes_retained=row.data is not None,
            )
            return True

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
        """Fail (or requeue) the claim's document, fenced; bytes are always kept."""
        async with self._lock:
            row = self._owned(claim)
            if row is None:
                return False
            row.worker_id = row.lease_until = None
            state = DocumentState.PENDING if retry else DocumentState.FAILED
            self._update(
                row,
                now,
                state=state,
                failure=refusal,
                failure_breach=breach,
                remedy=remedy_for(refusal, breach),
                findings=findings,
            )
            return True

    async def fail_exhausted(self, tenant_id: str, *, max_attempts: int, now: datetime) -> int:
        """Fail the tenant's documents at the attempt ceiling that no claim holds."""
        async with self._lock:
            count = 0
            for row in self._rows.values():
                doc = row.document
                expired = row.lease_until is not None and row.lease_until <= now
                unheld = (doc.state is DocumentState.PENDING and not doc.deleted) or (
                    doc.state is DocumentState.PROCESSING and expired
                )
                if doc.tenant_id == tenant_id and unheld and doc.attempts >= max_attempts:
                    refusal = DocumentRefusal.MALFORMED_DOCUMENT
                    row.worker_id = row.lease_until = None
                    self._update(
                        row,
                        now,
                        state=DocumentState.FAILED,
                        failure=refusal,
                        failure_breach=None,
                        remedy=REMEDIES[refusal],
                    )
                    count += 1
            return count

    async def get(self, tenant_id: str, document_id: str) -> StoredDocument | None:
        """The tenant's document, or None."""
        row = self._rows.get(document_id)
        return row.document if row and row.document.tenant_id == tenant_id else None

    async def list(
        self, tenant_id: str, *, states: Collection[DocumentState] | None = None
    ) -> list[StoredDocument]:
        """Non-deleted documents, newest first."""
        docs = [
            r.document
            for r in self._rows.values()
            if r.document.tenant_id == tenant_id
            and not r.document.deleted
            and (states is None or r.document.state in states)
        ]
        return sorted(docs, key=lambda d: (d.created_at, d.id), reverse=True)

    async def counts(self, tenant_id: str) -> Mapping[DocumentState, int]:
        """Counts per state."""
        counts = dict.fromkeys(DocumentState, 0)
        for doc in await self.list(tenant_id):
            counts[doc.state] += 1
        return counts

    async def queue_stats(self, tenant_id: str) -> QueueStats:
        """The tenant's live Pending documents: how many, and the oldest ``updated_at``."""
        waiting = [
            doc.updated_at
            for doc in (row.document for row in self._rows.values())
            if doc.tenant_id == tenant_id and doc.state is DocumentState.PENDING and not doc.deleted
        ]
        return QueueStats(waiting=len(waiting), oldest_queued_at=min(waiting, default=None))

    async def search_documents(self, tenant_id: str, query: DocumentSearch) -> DocumentPage:
        """Live documents matching ``query``, newest first by ``(created_at, id)``.

        The text matches the title, or a segment holding every word as a token (no stemming:
        the contract suite searches for words as they were indexed).
        """
        matched = [
            row.document
            for row in self._rows.values()
            if row.document.tenant_id == tenant_id
            and query.matches_metadata(row.document)
            and (query.text is None or self._text_matches(row, query))
        ]
        matched.sort(key=lambda d: (d.created_at, d.id), reverse=True)
        return DocumentPage.of(matched[: query.limit + 1], query.limit)

    @staticmethod
    def _text_matches(row: _Row, query: DocumentSearch) -> bool:
        assert query.text is not None
        if title_contains(row.document.title, query.text):
            return True
        words = set(query.words)
        return bool(words) and any(
            words <= set(search_words(segment.indexed)) for segment in row.segments
        )

    async def release(
        self,
        tenant_id: str,
        document_id: str,
        *,
        operator: str,
        now: datetime,
        audit: Callable[[StoredDocument], AuditRecord] | None = None,
    ) -> StoredDocument | None:
        """Quarantined → Indexed, recording the operator (and holding ``audit``'s record)."""
        async with self._lock:
            row = self._rows.get(document_id)
            if (
                row is None
                or row.document.tenant_id != tenant_id
                or row.document.deleted
                or row.document.state is not DocumentState.QUARANTINED
            ):
                return None
            self._update(row, now, state=DocumentState.INDEXED, released_by=operator)
            if audit is not None:
                self._outbox.append(audit(row.document))
            return row.document

    async def reindex(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> StoredDocument | None:
        """Back to Pending with attempts reset, if the bytes were retained (``audit`` held)."""
        async with self._lock:
            row = self._rows.get(document_id)
            if (
                row is None
                or row.document.tenant_id != tenant_id
                or row.document.deleted
                or row.data is None
                or row.document.state is DocumentState.PROCESSING
            ):
                return None
            self._update(row, now, state=DocumentState.PENDING, attempts=0)
            if audit is not None:
                self._outbox.append(audit)
            return row.document

    async def soft_delete(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> bool:
        """Flag deleted and erase the content, keeping the metadata (``audit`` held).

        The content hash is erased with the content (it reads as an empty string): it would
        confirm what the document said to anyone holding a candidate file. The claim counter
        moves and the lease goes, so a worker extracting the document owns nothing any more:
        its writes are refused by the fence.
        """
        async with self._lock:
            row = self._rows.get(document_id)
            if row is None or row.document.tenant_id != tenant_id or row.document.deleted:
                return False
            row.data, row.text, row.segments = None, None, ()
            row.worker_id = row.lease_until = None
            row.claim_seq += 1
            self._update(
                row,
                now,
                deleted=True,
                sha256="",
                findings=(),
                segment_count=0,
                bytes_retained=False,
            )
            if audit is not None:
                self._outbox.append(audit)
            return True

    async def pending_audit(self) -> builtins.list[AuditRecord]:
        """Every held audit record, in the order the actions were applied."""
        return list(self._outbox)

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the oldest held record with ``correlation_id``."""
        for index, record in enumerate(self._outbox):
            if record.correlation_id == correlation_id:
                del self._outbox[index]
                return

    @contextlib.asynccontextmanager
    async def claim_audit(self) -> AsyncIterator[AuditRecord | None]:
        """The oldest held record while the block runs, deleted when it completes (``None``:
        nothing held, or another claim is running)."""
        if self._claimed or not self._outbox:
            yield None
            return
        self._claimed = True
        try:
            record = self._outbox[0]
            yield record
            self._outbox.remove(record)
        finally:
            self._claimed = False

    async def original(self, tenant_id: str, document_id: str) -> bytes | None:
        """Retained bytes of a non-deleted document."""
        row = self._rows.get(document_id)
        if row is None or row.document.tenant_id != tenant_id or row.document.deleted:
            return None
        return row.data

    async def text(
        self, tenant_id: str, document_id: str, *, scopes: Collection[str]
    ) -> str | None:
        """Text of an Indexed, non-deleted, in-scope document, rebuilt from its segments."""
        row = self._rows.get(document_id)
        if (
            row is None
            or row.document.tenant_id != tenant_id
            or row.document.deleted
            or row.document.state is not DocumentState.INDEXED
            or row.document.scope not in scopes
        ):
            return None
        return "".join(s.body for s in sorted(row.segments, key=lambda s: s.ordinal))

    def segments(self, document_id: str) -> tuple[StoredSegment, ...]:
        """Test helper: the stored segments of a document."""
        return self._rows[document_id].segments

    async def load_configuration(self, tenant_id: str) -> StoreConfiguration | None:
        """The tenant's stored settings, or None."""
        return self._configurations.get(tenant_id)

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
        """Store the next revision if the current one is ``expected_revision`` (``audit``'s
        record of it held with it)."""
        async with self._lock:
            current = self._configurations.get(tenant_id)
            if (current.revision if current is not None else 0) != expected_revision:
                return None
            saved = StoreConfiguration(
                settings, revision=expected_revision + 1, updated_at=now, updated_by=by
            )
            record = audit(saved) if audit is not None else None
            self._configurations[tenant_id] = saved
            if record is not None:
                self._outbox.append(record)
            return saved
