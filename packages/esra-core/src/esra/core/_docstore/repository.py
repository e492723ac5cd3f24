"""The ``DocumentRepository`` port: persistence and work queue of the internal document store.

Implementations: PostgreSQL (production, ``FOR UPDATE SKIP LOCKED`` claims) and SQLite (the
embedded default), plus ``esra.core.testing.InMemoryDocumentRepository``; all pass
``esra.core.testing.docstore_contract``. Every method takes the tenant explicitly: there is
no global filter to forget.

It is also the store's audit outbox (``esra.core._admin.audit_outbox.AuditOutbox``): an
operator's release, reindex, delete, upload (``add``) or settings change
(``save_configuration``) hands the repository its ``ok`` audit record, which is written into
the store's own database in the transaction that applies the action, and forwarded to the
audit sink from there (``forward_audit_outbox``), so an action is never applied without its
record being kept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Protocol

from esra.core._admin.audit_outbox import AuditOutbox
from esra.core._audit.record import AuditRecord
from esra.core._docstore.model import Claim, DocumentState, IndexedContent, StoredDocument
from esra.core._docstore.ownership import UPLOADED, DocumentOwner
from esra.core._docstore.queue_stats import QueueStats
from esra.core._docstore.refusals import Breach
from esra.core._docstore.scanner import Finding
from esra.core._docstore.search import DocumentPage, DocumentSearch
from esra.core._docstore.store_configuration import ConfigurableSettings, StoreConfiguration
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["DocumentRepository"]


class DocumentRepository(AuditOutbox, Protocol):
    """**Protocol:** stores documents, their bytes, text and segments, and queues their work.

    It holds the audit records of the operators' actions (``release``, ``reindex``,
    ``soft_delete``, ``add``, ``save_configuration`` given ``audit=``) in its audit outbox,
    written with the action, until the audit sink has them (``claim_audit``; one claimant at
    a time across every process and handle on the store's database).

    Claims follow the queue rules of the anchors: claiming increments ``attempts`` (so a
    file that kills its worker still uses up attempts), each claimed document holds its own
    lease (owner and ``lease_until``, per document) which ``heartbeat`` renews from ``now``,
    heartbeat, completion and failure are fenced to the claim's (worker, ``claim_seq``) so a
    worker that lost its lease cannot overwrite the retry's outcome (``claim_seq`` counts the
    document's claims and, unlike ``attempts``, is never reset, not even by ``reindex``: a
    claim from before a re-index owns nothing after it), and an expired lease makes only its
    own document claimable again (at its next attempt) until the attempt ceiling. Workers claim with
    ``limit=1`` as they start each document, so a claim never holds one not being worked on.
    """

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
        """Persist a Pending document with its bytes, owned by ``owner``.

        Every upload is ``UPLOADED`` (the default); a sync connector passes its own
        ``DocumentOwner.by_connector(name)``, which makes the document read-only to operators.
        ``uploaded_by`` is the operator's subject, kept for the review screen's filter.

        An upload with a ``breach`` is stored Failed instead, in the same statement:
        ``MALFORMED_DOCUMENT`` with ``failure_breach`` and that breach's remedy, attempts 0,
        bytes kept, no text or segments, so no worker ever claims it.

        ``audit`` builds the upload's record from the stored document (its id, a Failed
        state); the record is held in the audit outbox in the same transaction as the
        document (none when it is refused). When ``audit`` raises, nothing is stored.

        Raises:
            DocumentRefusedError: ``DUPLICATE_DOCUMENT`` when the tenant already holds the
                same content hash (``detail`` names the existing document's title).
        """
        ...

    async def tenants_with_work(self, *, now: datetime) -> list[str]:
        """Tenants with a Pending document, or a Processing one whose lease expired."""
        ...

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
        """Claim up to ``limit`` claimable documents of one tenant, oldest first."""
        ...

    async def heartbeat(self, claim: Claim, *, lease_s: float, now: datetime) -> bool:
        """Extend the lease while the claim still owns the document; return whether it does."""
        ...

    async def complete(self, claim: Claim, content: IndexedContent, *, now: datetime) -> bool:
        """Store text and segments and set the final state, only if the claim still owns it."""
        ...

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

        ``findings`` are kept with a document rejected for them, so the operator sees why;
        ``breach`` (the safety limit a re-extracted package broke) becomes its
        ``failure_breach`` and chooses its remedy. The original bytes are always kept.
        """
        ...

    async def fail_exhausted(self, tenant_id: str, *, max_attempts: int, now: datetime) -> int:
        """Fail the tenant's documents at the attempt ceiling that no claim holds — a lapsed
        lease, or a document Pending at or above a ceiling lowered since its last attempt,
        which could never be claimed again; return how many. Only the tenant's:
        ``max_attempts`` is its own setting, and tenants may share one store."""
        ...

    async def get(self, tenant_id: str, document_id: str) -> StoredDocument | None:
        """One document's metadata (soft-deleted ones included, flagged)."""
        ...

    async def list(
        self, tenant_id: str, *, states: Collection[DocumentState] | None = None
    ) -> list[StoredDocument]:
        """Non-deleted documents of the tenant in every state (or the given ones), newest first."""
        ...

    async def counts(self, tenant_id: str) -> Mapping[DocumentState, int]:
        """Store-wide counts per state (non-deleted), every state present."""
        ...

    async def queue_stats(self, tenant_id: str) -> QueueStats:
        """The tenant's waiting documents (Pending, not deleted): how many, and when the
        longest-waiting one entered the queue (its ``updated_at``: upload, retry or reindex).

        One aggregate read, cheap enough for a worker to make after every tenant turn.
        """
        ...

    async def search_documents(self, tenant_id: str, query: DocumentSearch) -> DocumentPage:
        """One page of the tenant's non-deleted documents matching ``query``, newest first.

        Every state is searched (this is the review screen, not retrieval). The text goes
        through the store's own full-text index over the documents' segments, each word a
        literal, or matches the title (see ``esra.core._docstore.search``); ordered by
        ``(created_at, id)`` descending, the page starting strictly after ``query.cursor``.
        """
        ...

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

        ``audit`` builds the release's record from the released document; the record is held
        in the audit outbox in the same transaction as the release (none when nothing moved).
        """
        ...

    async def reindex(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> StoredDocument | None:
        """Return a document with retained bytes to Pending with attempts reset; None otherwise.

        ``audit`` is held in the audit outbox in the same transaction, when it is requeued.
        """
        ...

    async def soft_delete(
        self,
        tenant_id: str,
        document_id: str,
        *,
        now: datetime,
        audit: AuditRecord | None = None,
    ) -> bool:
        """Mark the document deleted and erase its content; return whether it was live.

        It disappears from search, fetch, the list and the counts, and in the same
        transaction everything that holds its content is erased: the original bytes, the
        extracted text, the segments and their full-text index entries, the scanner's
        findings (their excerpts quote the text) and the columns reserved for editing the
        text in place. What stays is a tombstone that ``get`` still returns, flagged: id,
        title, format, scope, state, attempts, timestamps, owner and uploader, size and
        content hash, the failure and its remedy — who stored what and when, not what it said.

        The delete also moves the document's ``claim_seq`` and drops its lease, so a worker
        extracting it owns nothing any more: its ``heartbeat``, ``complete`` and ``fail``
        are refused by the fence and cannot write the content back. There is no undelete.

        ``audit`` is held in the audit outbox in the same transaction, when it is deleted.
        """
        ...

    async def original(self, tenant_id: str, document_id: str) -> bytes | None:
        """The retained original bytes (authorization is the caller's: ESRA_DATA_MANAGE)."""
        ...

    async def text(
        self, tenant_id: str, document_id: str, *, scopes: Collection[str]
    ) -> str | None:
        """The full text of an Indexed, non-deleted document within ``scopes``, for fetch."""
        ...

    async def load_configuration(self, tenant_id: str) -> StoreConfiguration | None:
        """The tenant's configured store settings, or None if it never configured them."""
        ...

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
        """Store ``settings`` as the next revision if the stored one is ``expected_revision``
        (0: none stored yet); return what was stored, or None when another change won.

        The compare and the write are one statement, so of two concurrent changes made
        against the same revision exactly one is stored. ``audit`` builds the change's record
        from what was stored; it is held in the audit outbox in the same transaction (none
        when another change won). When ``audit`` raises, nothing is stored.
        """
        ...
