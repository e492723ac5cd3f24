"""The audit outbox's share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them: an
operator's release, reindex or delete, an upload's ``add`` and a settings change's
``save_configuration`` given its audit record holds the record in the store's outbox with the
action — holds nothing when the action changed nothing, and stores nothing when the record
cannot be made — and
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
from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.scanner import ScanPolicy
from esra.core._docstore.store_configuration import ConfigurableSettings, StoreConfiguration
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import AuditEvent, DocumentRefusal

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


def _upload(name: str, *, breach: Breach | None = None) -> AcceptedUpload:
    data = f"The body of {name}.".encode()
    return AcceptedUpload(
        display_name=name,
        format=DocumentFormat.DOCX if breach is not None else DocumentFormat.TXT,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        breach=breach,
    )


async def _add(repository: DocumentRepository, name: str, at: float = 0) -> StoredDocument:
    return await repository.add(_TENANT, _upload(name), scope="all", now=_at(at))


def _uploaded(document: StoredDocument) -> AuditRecord:
    """An upload's ``ok`` record of the stored document, as the management service makes it."""
    dimensions: dict[str, str | int | bool] = {"operator": "admin@corp", "document_id": document.id}
    if document.failure is not None:
        dimensions["refusal"] = document.failure.value
    if document.failure_breach is not None:
        dimensions["breach"] = document.failure_breach.value
    return AuditRecord(
        event=AuditEvent.DOCUMENT_UPLOAD,
        tenant_id=document.tenant_id,
        correlation_id=f"{AuditEvent.DOCUMENT_UPLOAD.value}:{document.id}",
        at=document.created_at,
        dimensions=dimensions,
    )


def _configured(configuration: StoreConfiguration) -> AuditRecord:
    """A settings change's ``ok`` record of the stored revision."""
    return AuditRecord(
        event=AuditEvent.STORE_CONFIGURE,
        tenant_id=_TENANT,
        correlation_id=f"{AuditEvent.STORE_CONFIGURE.value}:admin@corp",
        at=_T0,
        dimensions={
            "operator": "admin@corp",
            "after": configuration.settings.described(),
            "revision": configuration.revision,
        },
    )


def _unmakeable(_made: object) -> AuditRecord:
    """An audit callback that cannot make its record: the action must not be stored."""
    raise RuntimeError


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

    async def test_an_added_documents_record_is_held_with_it(
        self, repository: DocumentRepository
    ) -> None:
        """``audit`` is handed the stored document (its id, a breach's Failed state)."""
        plain = await repository.add(_TENANT, _upload("u.txt"), scope="all", now=_at(1))
        stored = await repository.add(
            _TENANT, _upload("a.txt"), scope="all", now=_at(2), audit=_uploaded
        )
        failed = await repository.add(
            _TENANT,
            _upload("bomb.docx", breach=Breach.ZIP_COMPRESSION_RATIO),
            scope="all",
            now=_at(3),
            uploaded_by="admin@corp",
            audit=_uploaded,
        )
        assert failed.state is DocumentState.FAILED
        twin = await self._twin(repository)
        held = await twin.pending_audit()
        assert held == [_uploaded(stored), _uploaded(failed)]  # none for the add without
        assert held[0].dimensions["document_id"] == stored.id != plain.id
        assert held[1].dimensions == {
            "operator": "admin@corp",
            "document_id": failed.id,
            "refusal": DocumentRefusal.MALFORMED_DOCUMENT.value,
            "breach": Breach.ZIP_COMPRESSION_RATIO.value,
        }
        assert held[0].at.astimezone(UTC) == _at(2)

    async def test_an_add_refused_or_whose_record_cannot_be_made_stores_and_holds_nothing(
        self, repository: DocumentRepository
    ) -> None:
        await _add(repository, "a.txt")
        with pytest.raises(DocumentRefusedError) as refused:
            await repository.add(
                _TENANT, _upload("a.txt"), scope="all", now=_at(1), audit=_uploaded
            )
        assert refused.value.refusal is DocumentRefusal.DUPLICATE_DOCUMENT
        with pytest.raises(RuntimeError):
            await repository.add(
                _TENANT, _upload("b.txt"), scope="all", now=_at(2), audit=_unmakeable
            )
        assert [d.title for d in await repository.list(_TENANT)] == ["a.txt"]
        assert await repository.pending_audit() == []

    async def test_a_saved_configurations_record_is_held_with_it(
        self, repository: DocumentRepository
    ) -> None:
        """``audit`` is handed the stored revision; a stale save holds nothing."""
        settings = ConfigurableSettings(scan_policy=ScanPolicy.REJECT, max_attempts=4)
        first = await repository.save_configuration(
            _TENANT, settings, expected_revision=0, by="admin@corp", now=_at(1), audit=_configured
        )
        assert first is not None
        stale = await repository.save_configuration(
            _TENANT, settings, expected_revision=0, by="admin@corp", now=_at(2), audit=_configured
        )
        assert stale is None
        changed = ConfigurableSettings(max_attempts=9)
        second = await repository.save_configuration(
            _TENANT, changed, expected_revision=1, by="admin@corp", now=_at(3), audit=_configured
        )
        assert second is not None
        unheld = await repository.save_configuration(
            _TENANT, settings, expected_revision=2, by="admin@corp", now=_at(4)
        )
        assert unheld is not None
        twin = await self._twin(repository)
        held = await twin.pending_audit()
        assert held == [_configured(first), _configured(second)]
        assert [r.dimensions["revision"] for r in held] == [1, 2]
        assert held[1].dimensions["after"] == changed.described()

    async def test_a_configuration_whose_record_cannot_be_made_is_not_saved(
        self, repository: DocumentRepository
    ) -> None:
        settings = ConfigurableSettings(max_attempts=4)
        for revision in (0, 1):
            if revision:
                assert await repository.save_configuration(
                    _TENANT, settings, expected_revision=0, by="admin@corp", now=_at(1)
                )
            with pytest.raises(RuntimeError):
                await repository.save_configuration(
                    _TENANT,
                    ConfigurableSettings(max_attempts=9),
                    expected_revision=revision,
                    by="admin@corp",
                    now=_at(2),
                    audit=_unmakeable,
                )
            stored = await repository.load_configuration(_TENANT)
            if revision == 0:
                assert stored is None  # the first revision was not stored
            else:
                assert stored is not None
                assert (stored.revision, stored.settings) == (1, settings)  # not changed
        assert await repository.pending_audit() == []
