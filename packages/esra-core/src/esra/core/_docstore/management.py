"""Store management: the review list, release from quarantine, reindex, delete, download.

The management view is the inverse of retrieval: it shows every state, including the two a
caller can never receive, with store-wide counts that double as filters. Overriding a
security finding (release) and pulling original bytes out (download) are separate, audited
actions; download needs ``ESRA_DATA_MANAGE``, not just ``ESRA_DATA_READ``.

A release, reindex, delete or upload and its ``ok`` audit record are never apart: the
repository writes the record into the store's own audit outbox in the transaction that
applies the action (for an upload, each stored file's with its document), and the service
then forwards what the outbox holds to the audit sink (``forward_audit_outbox``), which
deletes each record once the sink has it. A sink failing then, or a process killed before the
forward, leaves the record held for the next forward (the next action's, the host's start, or
its timer). Denials and refusals (a refused file among them) change nothing and are recorded
directly, as is a download.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

import attrs

from esra.core._admin.audit_outbox import forward_audit_outbox
from esra.core._admin.roles import Administrator, Grant, NotPermittedError, Role
from esra.core._audit.acceptance import require_accepting
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._docstore.ingestion import UploadOutcome, upload_files
from esra.core._docstore.model import DocumentState, StoredDocument
from esra.core._docstore.ownership import DocumentReadOnlyError
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.scanner import Finding
from esra.core._docstore.search import DocumentCursor, DocumentSearch
from esra.core._docstore.upload import UploadLimits
from esra.core._encodable import encodable
from esra.core._pipeline.content_generation import renew_content_generation
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.ports import AuditSink, Cache, Clock

__all__ = [
    "DATA_MANAGE",
    "DATA_READ",
    "DocumentReadOnlyError",
    "DocumentRow",
    "DocumentStoreService",
    "NotPermittedError",
    "Operator",
    "StoreOverview",
    "StoreSearchPage",
]

DATA_READ = Role.ESRA_DATA_READ
DATA_MANAGE = Role.ESRA_DATA_MANAGE

_log = logging.getLogger(__name__)


@attrs.frozen
class Operator:
    """An authenticated administrator acting on one tenant's store.

    ``tenant_id`` is the tenant acted on; ``roles`` are held on it, ``cross_tenant_roles``
    on every tenant (grants with no tenant). ``home_tenant_id`` is the operator's own tenant
    (None: the same as ``tenant_id``); it grants nothing, and an operator acting anywhere
    else is :attr:`cross_tenant`, which every audit record of its actions says. The check is
    ``esra.core.admin``'s role model (manage implies read), and a role name outside it
    grants nothing.
    """

    subject: str
    tenant_id: str
    roles: frozenset[str] = frozenset()
    home_tenant_id: str | None = None
    cross_tenant_roles: frozenset[str] = frozenset()

    @classmethod
    def acting_for(cls, administrator: Administrator, tenant_id: str) -> Operator:
        """``administrator`` acting on ``tenant_id``: its grants there and on every tenant.

        Grants on other named tenants are left out: they permit nothing on this one.
        """
        return cls(
            subject=administrator.subject,
            tenant_id=tenant_id,
            roles=frozenset(g.role.value for g in administrator.grants if g.tenant_id == tenant_id),
            home_tenant_id=administrator.home_tenant_id,
            cross_tenant_roles=frozenset(
                g.role.value for g in administrator.grants if g.tenant_id is None
            ),
        )

    @property
    def home_tenant(self) -> str:
        """The operator's own tenant."""
        return self.tenant_id if self.home_tenant_id is None else self.home_tenant_id

    @property
    def cross_tenant(self) -> bool:
        """Whether the operator acts on a tenant other than its own."""
        return self.home_tenant != self.tenant_id

    @property
    def administrator(self) -> Administrator:
        """The operator as the role model sees it: its grants and its home tenant."""
        own = (Grant(Role(r), self.tenant_id) for r in self.roles if r in _ROLE_NAMES)
        everywhere = (Grant(Role(r), None) for r in self.cross_tenant_roles if r in _ROLE_NAMES)
        return Administrator.of(self.subject, *own, *everywhere, home_tenant_id=self.home_tenant)

    def may(self, role: Role) -> bool:
        """Whether the operator holds ``role`` (or a role implying it) on ``tenant_id``."""
        return self.administrator.may(role, self.tenant_id)

    def require(self, role: Role) -> None:
        """Raise ``NotPermittedError`` unless the operator holds ``role`` on ``tenant_id``."""
        if not self.may(role):
            raise NotPermittedError

    def audit_dimensions(self, tenant_id: str | None = None) -> dict[str, AuditDimension]:
        """Who acted, for a record of an action on ``tenant_id`` (default: the one it acts on).

        ``operator`` always; ``cross_tenant`` and ``operator_tenant`` when the tenant acted on
        is not the operator's home tenant, denials included.
        """
        acted_on = self.tenant_id if tenant_id is None else tenant_id
        return {"operator": self.subject, **self.administrator.acting_dimensions(acted_on)}


_ROLE_NAMES = frozenset(r.value for r in Role)


@attrs.frozen
class DocumentRow:
    """One row of the review list, with what the screen must call out.

    A connector-owned document is read-only: no release, re-index or delete is available,
    and ``read_only_reason`` says why (None for an uploaded document).
    """

    document: StoredDocument
    zero_segments: bool
    reindex_available: bool
    release_available: bool

    @property
    def read_only_reason(self) -> str | None:
        """Why an operator cannot change this document by hand (None when they can)."""
        return self.document.owner.read_only_reason

    @property
    def delete_available(self) -> bool:
        """Whether an operator may delete it (a connector's documents follow their source)."""
        return not self.document.owner.read_only


@attrs.frozen
class StoreOverview:
    """Counts for every state (usable as filters) and the rows matching the filter."""

    counts: Mapping[DocumentState, int]
    rows: tuple[DocumentRow, ...]


@attrs.frozen
class StoreSearchPage:
    """Counts for every state (store-wide, as filters) and one page of matching rows."""

    counts: Mapping[DocumentState, int]
    rows: tuple[DocumentRow, ...]
    next_cursor: DocumentCursor | None


def _bindable_id(document_id: str) -> str:
    """``document_id`` as every engine can bind it and every audit store can hold it.

    Ids come from a URL, so they may hold NUL (``%00``), which PostgreSQL text refuses, or a
    lone surrogate, which UTF-8 cannot carry: binding either failed the request with the
    driver's error instead of not-found. Each becomes U+FFFD, which no id the store mints
    (hex) holds, so the id still names no document — as it did not before.
    """
    return encodable(document_id).replace("\x00", "\ufffd")


class DocumentStoreService:
    """Management actions over one repository, each checked and audited.

    ``cache`` is the host's result cache, when it has one: an action that takes a document
    out of retrieval (delete, re-index) renews the tenant's content generation in it before
    returning, so no response cached while the document was searchable is served again.
    """

    def __init__(
        self,
        repository: DocumentRepository,
        *,
        audit: AuditSink,
        clock: Clock,
        cache: Cache | None = None,
    ) -> None:
        self._repository = repository
        self._audit = audit
        self._clock = clock
        self._cache = cache

    async def upload(
        self,
        operator: Operator,
        files: Iterable[tuple[str, bytes]],
        *,
        scope: str,
        limits: UploadLimits | None = None,
    ) -> list[UploadOutcome]:
        """Inspect and store each file as Pending under ``scope``; one outcome per file.

        Needs ``ESRA_DATA_MANAGE``. Each file is audited on its own (stored with its document
        id, refused with the classified reason, or stored as Failed with both and the
        ``breach``), never with its name or content. The operator is recorded as uploader.

        A stored file's record is held in the store's audit outbox with the document and
        forwarded once the files are stored; a refused file (nothing stored) is recorded
        directly, after the stored files' records before it are forwarded, so the sink gets
        the records in the files' order.
        """
        await self._require(operator, DATA_MANAGE, AuditEvent.DOCUMENT_UPLOAD, None)
        # Nothing is stored while records cannot be taken (a refusal's is written directly).
        await require_accepting(self._audit)

        def stored_record(document: StoredDocument) -> AuditRecord:
            failed = document.state is DocumentState.FAILED
            refusal = document.failure if failed else None
            breach = document.failure_breach
            return self._audit_record(
                operator,
                AuditEvent.DOCUMENT_UPLOAD,
                document.id,
                ok=True,
                at=document.created_at,
                refusal=refusal.value if refusal is not None else None,
                breach=breach.value if breach is not None else None,
            )

        outcomes: list[UploadOutcome] = []
        held = False  # a stored file's record is held, not yet forwarded
        # One file at a time (``files`` may be lazy): a refusal is recorded as it happens.
        for file in files:
            (outcome,) = await upload_files(
                self._repository,
                operator.tenant_id,
                [file],
                scope=scope,
                clock=self._clock,
                limits=limits,
                uploaded_by=operator.subject,
                audit=stored_record,
            )
            outcomes.append(outcome)
            if outcome.document is not None:
                held = True
                continue
            if held:  # the records of the files before it first, in the files' order
                await self._forward(operator, AuditEvent.DOCUMENT_UPLOAD, None)
                held = False
            await self._record(
                operator,
                AuditEvent.DOCUMENT_UPLOAD,
                None,
                ok=False,
                refusal=outcome.refusal.value if outcome.refusal else None,
            )
        if held:
            await self._forward(operator, AuditEvent.DOCUMENT_UPLOAD, None)
        return outcomes

    async def document(self, operator: Operator, document_id: str) -> DocumentRow | None:
        """One non-deleted document's row, or None; needs ``ESRA_DATA_READ``."""
        document_id = _bindable_id(document_id)
        operator.require(DATA_READ)
        document = await self._repository.get(operator.tenant_id, document_id)
        if document is None or document.deleted:
            return None
        return _row(document)

    async def counts(self, operator: Operator) -> Mapping[DocumentState, int]:
        """Store-wide counts per state (every state present); needs ``ESRA_DATA_READ``."""
        operator.require(DATA_READ)
        return await self._repository.counts(operator.tenant_id)

    async def overview(
        self, operator: Operator, *, states: Collection[DocumentState] | None = None
    ) -> StoreOverview:
        """Every state's count, and the documents (all states unless filtered)."""
        operator.require(DATA_READ)
        counts = await self._repository.counts(operator.tenant_id)
        documents = await self._repository.list(operator.tenant_id, states=states)
        return StoreOverview(counts=counts, rows=tuple(_row(d) for d in documents))

    async def search(self, operator: Operator, query: DocumentSearch) -> StoreSearchPage:
        """Every state's count, and one page of the documents ``query`` matches.

        Needs ``ESRA_DATA_READ``, like ``overview`` (and, like it, reading is not audited).
        The text goes through the store's own full-text index; see
        ``esra.core._docstore.search``. The tenant is always the operator's.
        """
        operator.require(DATA_READ)
        counts = await self._repository.counts(operator.tenant_id)
        page = await self._repository.search_documents(operator.tenant_id, query)
        return StoreSearchPage(
            counts=counts,
            rows=tuple(_row(d) for d in page.documents),
            next_cursor=page.next_cursor,
        )

    async def findings(self, operator: Operator, document_id: str) -> tuple[Finding, ...]:
        """What the scanner matched: shown to the operator before a release."""
        document_id = _bindable_id(document_id)
        operator.require(DATA_READ)
        document = await self._repository.get(operator.tenant_id, document_id)
        if document is None or document.deleted:
            raise NotPermittedError
        return document.findings

    async def release(self, operator: Operator, document_id: str) -> StoredDocument:
        """Release a quarantined document to Indexed; audited with the operator and findings.

        Raises:
            NotPermittedError: no ``ESRA_DATA_MANAGE``, or the document is not Quarantined.
            DocumentReadOnlyError: a connector owns the document (the refusal is audited).
        """
        document_id = _bindable_id(document_id)
        await self._require(operator, DATA_MANAGE, AuditEvent.DOCUMENT_RELEASE, document_id)
        await self._refuse_read_only(operator, AuditEvent.DOCUMENT_RELEASE, document_id)
        await require_accepting(self._audit)
        now = self._clock.now()
        released = await self._repository.release(
            operator.tenant_id,
            document_id,
            operator=operator.subject,
            now=now,
            audit=lambda document: self._audit_record(
                operator,
                AuditEvent.DOCUMENT_RELEASE,
                document_id,
                ok=True,
                at=now,
                findings=len(document.findings),
            ),
        )
        if released is None:
            await self._record(
                operator, AuditEvent.DOCUMENT_RELEASE, document_id, ok=False, findings=0
            )
            raise NotPermittedError
        await self._forward(operator, AuditEvent.DOCUMENT_RELEASE, document_id)
        return released

    async def reindex(self, operator: Operator, document_id: str) -> StoredDocument:
        """Queue a document for extraction again, attempts reset; only with retained bytes.

        Raises:
            NotPermittedError: no ``ESRA_DATA_MANAGE``, no retained bytes, or being processed.
            DocumentReadOnlyError: a connector owns the document (the refusal is audited).
        """
        document_id = _bindable_id(document_id)
        await self._require(operator, DATA_MANAGE, AuditEvent.DOCUMENT_REINDEX, document_id)
        await self._refuse_read_only(operator, AuditEvent.DOCUMENT_REINDEX, document_id)
        await require_accepting(self._audit)
        now = self._clock.now()
        queued = await self._repository.reindex(
            operator.tenant_id,
            document_id,
            now=now,
            audit=self._audit_record(
                operator, AuditEvent.DOCUMENT_REINDEX, document_id, ok=True, at=now
            ),
        )
        if queued is None:
            await self._record(operator, AuditEvent.DOCUMENT_REINDEX, document_id, ok=False)
            raise NotPermittedError
        await self._forward(operator, AuditEvent.DOCUMENT_REINDEX, document_id)
        await self._out_of_retrieval(operator.tenant_id)
        return queued

    async def delete(self, operator: Operator, document_id: str) -> None:
        """Soft-delete a document: gone from search, fetch and the list, its content erased.

        The repository keeps a tombstone (title, state, timestamps, uploader) and erases the
        bytes, text, segments and findings in the delete's transaction (``soft_delete``).

        Raises:
            NotPermittedError: no ``ESRA_DATA_MANAGE``, or no such live document.
            DocumentReadOnlyError: a connector owns the document (the refusal is audited).
        """
        document_id = _bindable_id(document_id)
        await self._require(operator, DATA_MANAGE, AuditEvent.DOCUMENT_DELETE, document_id)
        await self._refuse_read_only(operator, AuditEvent.DOCUMENT_DELETE, document_id)
        await require_accepting(self._audit)
        now = self._clock.now()
        deleted = await self._repository.soft_delete(
            operator.tenant_id,
            document_id,
            now=now,
            audit=self._audit_record(
                operator, AuditEvent.DOCUMENT_DELETE, document_id, ok=True, at=now
            ),
        )
        if not deleted:
            await self._record(operator, AuditEvent.DOCUMENT_DELETE, document_id, ok=False)
            raise NotPermittedError
        await self._forward(operator, AuditEvent.DOCUMENT_DELETE, document_id)
        await self._out_of_retrieval(operator.tenant_id)

    async def _forward(
        self, operator: Operator, event: AuditEvent, document_id: str | None
    ) -> None:
        """Hand the held audit records (this action's among them) to the audit sink.

        The action is applied and its record held with it, so a sink failing here does not
        fail the action: the record is delivered by the next forward (the next action's, the
        host's next start, or its timer).
        """
        try:
            await forward_audit_outbox(self._repository, self._audit)
        except Exception as exc:
            _log.warning(
                "a document store action was applied; its audit record is held in the "
                "store's database until the audit sink takes it (%s)",
                type(exc).__name__,
                extra={
                    "tenant_id": operator.tenant_id,
                    "action": event.value,
                    "document_id": document_id,
                },
            )

    async def _out_of_retrieval(self, tenant_id: str) -> None:
        """A document left retrieval: cached responses that may show it must not be served."""
        if self._cache is not None:
            await renew_content_generation(self._cache, tenant_id)

    async def download(self, operator: Operator, document_id: str) -> tuple[str, bytes]:
        """The original bytes and display name; requires ``ESRA_DATA_MANAGE``.

        Serve them as ``application/octet-stream`` with an attachment disposition: the
        store never renders a document.
        """
        document_id = _bindable_id(document_id)
        await self._require(operator, DATA_MANAGE, AuditEvent.DOCUMENT_DOWNLOAD, document_id)
        document = await self._repository.get(operator.tenant_id, document_id)
        data = await self._repository.original(operator.tenant_id, document_id)
        await self._record(operator, AuditEvent.DOCUMENT_DOWNLOAD, document_id, ok=data is not None)
        if document is None or data is None:
            raise NotPermittedError
        return document.title, data

    async def _require(
        self, operator: Operator, role: Role, event: AuditEvent, document_id: str | None
    ) -> None:
        """Raise ``NotPermittedError`` unless the operator holds ``role``; audit a denial."""
        if not operator.may(role):
            await self._record(operator, event, document_id, ok=False)
            raise NotPermittedError

    async def _refuse_read_only(
        self, operator: Operator, event: AuditEvent, document_id: str
    ) -> None:
        """Raise ``DocumentReadOnlyError`` for a connector-owned document; audit the refusal.

        The owner never changes once stored, so checking before the action cannot race it.
        """
        document = await self._repository.get(operator.tenant_id, document_id)
        if document is None or document.deleted or not document.owner.read_only:
            return
        await self._record(
            operator,
            event,
            document_id,
            ok=False,
            refusal=ErrorCode.ESRA_DOCUMENT_READ_ONLY.value,
        )
        raise DocumentReadOnlyError(document.owner)

    async def _record(
        self,
        operator: Operator,
        event: AuditEvent,
        document_id: str | None,
        *,
        ok: bool,
        findings: int | None = None,
        refusal: str | None = None,
        breach: str | None = None,
    ) -> None:
        await self._audit.record(
            self._audit_record(
                operator,
                event,
                document_id,
                ok=ok,
                at=self._clock.now(),
                findings=findings,
                refusal=refusal,
                breach=breach,
            )
        )

    @staticmethod
    def _audit_record(
        operator: Operator,
        event: AuditEvent,
        document_id: str | None,
        *,
        ok: bool,
        at: datetime,
        findings: int | None = None,
        refusal: str | None = None,
        breach: str | None = None,
    ) -> AuditRecord:
        dimensions = operator.audit_dimensions()
        if document_id is not None:
            dimensions["document_id"] = document_id
        if findings is not None:
            dimensions["findings"] = findings
        if refusal is not None:
            dimensions["refusal"] = refusal
        if breach is not None:
            dimensions["breach"] = breach
        return AuditRecord(
            event=event,
            tenant_id=operator.tenant_id,
            correlation_id=f"{event.value}:{document_id or operator.subject}",
            at=at,
            outcome="ok" if ok else "denied",
            dimensions=dimensions,
        )


def _row(document: StoredDocument) -> DocumentRow:
    return DocumentRow(
        document=document,
        # Indexed yet unsearchable: nothing about the state alone says so.
        zero_segments=document.state is DocumentState.INDEXED and document.segment_count == 0,
        reindex_available=document.bytes_retained
        and document.state is not DocumentState.PROCESSING
        and not document.owner.read_only,
        release_available=document.state is DocumentState.QUARANTINED
        and not document.owner.read_only,
    )
