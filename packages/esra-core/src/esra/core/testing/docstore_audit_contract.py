"""The audit outbox's share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them: an
operator's release, reindex or delete given its audit record holds the record in the store's
outbox with the action — and holds nothing when the action changed nothing — and
``claim_audit`` hands the held records out oldest first, one claimant at a time, deleting each
only when its block completes.

A repository over shared storage also implements ``make_twin``: another handle (another
connection, as another process would open) on the same store, which must see the records
held through the first and be refused a claim while the first holds one.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from esra.core._admin.audit_outbox import forward_audit_outbox
from esra.core._audit.record import AuditRecord
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState, IndexedContent, StoredDocument
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import AuditEvent

__all__ = ["DocumentAuditOutboxContract"]

_T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
_TENANT = "outbox-tenant"


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


def _record(event: AuditEvent, document_id: str, at: float, **extra: int) -> AuditRecord:
    """An operator action's ``ok`` record, as the management service makes it."""
    return AuditRecord(
        event=event,
        tenant_id=_TENANT,
        correlation_id=f"{event.value}:{document_id}",
        at=_at(at),
        dimensions={"operator": "admin@corp", "document_id": document_id, **extra},
    )


async def _add(repository: DocumentRepository, name: str, at: float = 0) -> StoredDocument:
    data = f"The body of {name}.".encode()
    upload = AcceptedUpload(
        display_name=name,
        format=DocumentFormat.TXT,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
    )
    return await repository.add(_TENANT, upload, scope="all", now=_at(at))


async def _quarantined(repository: DocumentRepository, name: str) -> StoredDocument:
    document = await _add(repository, name)
    (claim,) = await repository.claim(
        _TENANT, worker_id="w1", limit=1, lease_s=60, max_attempts=3, now=_at(1)
    )
    content = IndexedContent(text="x", segments=(), findings=(), state=DocumentState.QUARANTINED)
    assert await repository.complete(claim, content, now=_at(2))
    return document


@attrs.define
class _Sink:
    records: list[AuditRecord] = attrs.Factory(list)

    async def record(self, record: AuditRecord) -> None:
        await asyncio.sleep(0.005)
        self.records.append(record)


@pytest.mark.asyncio
class DocumentAuditOutboxContract:
    """The repository's audit outbox (mixed into ``DocumentRepositoryContract``)."""

    def make_twin(
        self, repository: DocumentRepository
    ) -> DocumentRepository | Awaitable[DocumentRepository] | None:
        """Another handle on ``repository``'s store (None: it has no storage to share; the
        tests then use ``repository`` itself). Closed with ``close_repository``."""
        return None

    async def _twin(self, repository: DocumentRepository) -> DocumentRepository:
        made = self.make_twin(repository)
        if made is None:
            return repository
        twin = await made if inspect.isawaitable(made) else made
        self._twins.append(twin)
        return twin

    @pytest.fixture(autouse=True)
    async def _close_twins(self) -> AsyncIterator[None]:
        self._twins: list[DocumentRepository] = []
        yield
        for twin in self._twins:
            close = getattr(twin, "close", None)
            if callable(close):
                await close()

    async def test_an_actions_record_is_held_with_it_in_order_until_claimed(
        self, repository: DocumentRepository
    ) -> None:
        held = await _quarantined(repository, "q.txt")
        queued = await _add(repository, "r.txt", at=3)
        gone = await _add(repository, "d.txt", at=4)
        released = await repository.release(
            _TENANT,
            held.id,
            operator="admin@corp",
            now=_at(5),
            audit=lambda document: _record(
                AuditEvent.DOCUMENT_RELEASE,
                document.id,
                5,
                findings=len(document.findings),
                state_is_indexed=int(document.state is DocumentState.INDEXED),
            ),
        )
        assert released is not None
        reindex = _record(AuditEvent.DOCUMENT_REINDEX, queued.id, 6)
        assert await repository.reindex(_TENANT, queued.id, now=_at(6), audit=reindex)
        delete = _record(AuditEvent.DOCUMENT_DELETE, gone.id, 7)
        assert await repository.soft_delete(_TENANT, gone.id, now=_at(7), audit=delete)
        release = _record(AuditEvent.DOCUMENT_RELEASE, held.id, 5, findings=0, state_is_indexed=1)
        twin = await self._twin(repository)
        # Held durably, in the order applied, readable through another handle.
        assert await twin.pending_audit() == [release, reindex, delete]
        async with twin.claim_audit() as first:
            assert first == release
        assert await repository.pending_audit() == [reindex, delete]

    async def test_an_action_that_changes_nothing_holds_no_record(
        self, repository: DocumentRepository
    ) -> None:
        pending = await _add(repository, "p.txt")
        assert (
            await repository.release(
                _TENANT,
                pending.id,
                operator="x",
                now=_at(1),
                audit=lambda d: _record(AuditEvent.DOCUMENT_RELEASE, d.id, 1),
            )
            is None
        )
        missing = _record(AuditEvent.DOCUMENT_REINDEX, "no-such-document", 2)
        assert (
            await repository.reindex(_TENANT, "no-such-document", now=_at(2), audit=missing) is None
        )
        assert await repository.soft_delete(_TENANT, pending.id, now=_at(3))  # none to hold
        again = _record(AuditEvent.DOCUMENT_DELETE, pending.id, 4)
        assert not await repository.soft_delete(_TENANT, pending.id, now=_at(4), audit=again)
        assert await repository.pending_audit() == []
        async with repository.claim_audit() as nothing:
            assert nothing is None

    async def test_two_actions_on_one_document_hold_two_records(
        self, repository: DocumentRepository
    ) -> None:
        """Their correlation ids are equal (the document's): both are held and delivered."""
        document = await _add(repository, "twice.txt")
        first = _record(AuditEvent.DOCUMENT_REINDEX, document.id, 1)
        second = _record(AuditEvent.DOCUMENT_REINDEX, document.id, 2)
        assert await repository.reindex(_TENANT, document.id, now=_at(1), audit=first)
        assert await repository.reindex(_TENANT, document.id, now=_at(2), audit=second)
        assert await repository.pending_audit() == [first, second]
        sink = _Sink()
        assert await forward_audit_outbox(repository, sink) == 2
        assert sink.records == [first, second]
        assert await repository.pending_audit() == []

    async def test_a_claim_whose_block_raises_leaves_the_record_held(
        self, repository: DocumentRepository
    ) -> None:
        one, two = await _add(repository, "1.txt"), await _add(repository, "2.txt", at=1)
        first = _record(AuditEvent.DOCUMENT_DELETE, one.id, 2)
        second = _record(AuditEvent.DOCUMENT_DELETE, two.id, 3)
        assert await repository.soft_delete(_TENANT, one.id, now=_at(2), audit=first)
        assert await repository.soft_delete(_TENANT, two.id, now=_at(3), audit=second)

        async def refused() -> None:
            async with repository.claim_audit() as record:
                assert record == first
                raise ConnectionError  # the sink refused it: it stays held

        with pytest.raises(ConnectionError):
            await refused()
        assert await repository.pending_audit() == [first, second]
        await repository.settle_audit(first.correlation_id)
        await repository.settle_audit("esra.document.delete:never-held")
        assert await repository.pending_audit() == [second]

    async def test_while_a_claim_is_held_no_other_handle_gets_one(
        self, repository: DocumentRepository
    ) -> None:
        one, two = await _add(repository, "1.txt"), await _add(repository, "2.txt", at=1)
        first = _record(AuditEvent.DOCUMENT_DELETE, one.id, 2)
        second = _record(AuditEvent.DOCUMENT_DELETE, two.id, 3)
        assert await repository.soft_delete(_TENANT, one.id, now=_at(2), audit=first)
        assert await repository.soft_delete(_TENANT, two.id, now=_at(3), audit=second)
        twin = await self._twin(repository)
        async with repository.claim_audit() as record:
            assert record == first
            async with twin.claim_audit() as other:
                assert other is None  # its holder is forwarding
        async with twin.claim_audit() as record:
            assert record == second
        assert await repository.pending_audit() == []

    async def test_two_handles_forwarding_at_once_deliver_each_record_once_in_order(
        self, repository: DocumentRepository
    ) -> None:
        held: list[AuditRecord] = []
        for index in range(6):
            document = await _add(repository, f"{index}.txt", at=index)
            record = _record(AuditEvent.DOCUMENT_DELETE, document.id, 10 + index)
            assert await repository.soft_delete(_TENANT, document.id, now=_at(10), audit=record)
            held.append(record)
        twin = await self._twin(repository)
        taken: list[AuditRecord] = []

        async def drain(handle: DocumentRepository) -> None:
            sink = _Sink(taken)
            async with asyncio.timeout(30):
                while await handle.pending_audit():
                    await forward_audit_outbox(handle, sink)
                    await asyncio.sleep(0.005)

        await asyncio.gather(drain(repository), drain(twin))
        assert taken == held
