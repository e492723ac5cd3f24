"""Stored breaches and uploaders: their share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them:

- an upload carrying a ``breach`` (a ``.docx`` that broke a safety limit) is stored Failed
  in the same statement — ``MALFORMED_DOCUMENT``, the breach named, its remedy, attempts 0,
  bytes kept even by a store that discards them, no text or segments — and no worker ever
  claims it until an operator re-indexes it by hand;
- a failure with a breach records it and its remedy, and a later success clears both;
- the uploader is recorded with the document, and the management search filters by it
  exactly (never as a prefix or pattern), within the tenant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import DocumentState, IndexedContent, StoredSegment
from esra.core._docstore.refusals import BREACH_REMEDIES, REMEDIES, Breach, DocumentRefusedError
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.search import DocumentSearch
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["DocumentFailureContract"]

_T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
_TENANT = "failure-tenant"
_OTHER = "failure-other"
_BOMB = b"PK\x03\x04 not really a bomb, the repository never opens it"


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


def _upload(name: str, data: bytes, *, breach: Breach | None = None) -> AcceptedUpload:
    return AcceptedUpload(
        display_name=name,
        format=DocumentFormat.DOCX if breach is not None else DocumentFormat.TXT,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        breach=breach,
    )


async def _claim_all(repository: DocumentRepository, tenant: str, at: float) -> list[str]:
    claims = await repository.claim(
        tenant, worker_id="w", limit=10, lease_s=60.0, max_attempts=3, now=_at(at)
    )
    return [claim.document_id for claim in claims]


@pytest.mark.asyncio
class DocumentFailureContract:
    """Breaches stored as Failed documents, breach failures, and the uploader filter."""

    async def test_a_breach_is_stored_failed_and_never_claimed(
        self, repository: DocumentRepository
    ) -> None:
        """Failed at once, classified with the breach and its remedy; no worker sees it."""
        document = await repository.add(
            _TENANT, _upload("bomb.docx", _BOMB, breach=Breach.ZIP_COMPRESSION_RATIO),
            scope="all", now=_at(0), uploaded_by="alice",
        )  # fmt: skip
        assert document.state is DocumentState.FAILED
        assert document.failure is DocumentRefusal.MALFORMED_DOCUMENT
        assert document.failure_breach is Breach.ZIP_COMPRESSION_RATIO
        assert document.remedy == BREACH_REMEDIES[Breach.ZIP_COMPRESSION_RATIO]
        assert (document.attempts, document.segment_count) == (0, 0)
        assert document.uploaded_by == "alice"
        assert await repository.get(_TENANT, document.id) == document
        assert await repository.original(_TENANT, document.id) == _BOMB
        assert await repository.text(_TENANT, document.id, scopes={"all"}) is None
        assert await repository.tenants_with_work(now=_at(1)) == []
        assert await _claim_all(repository, _TENANT, at=1) == []

    async def test_a_breach_keeps_its_bytes_in_a_store_that_discards_them(
        self, open_repository: Callable[..., Awaitable[DocumentRepository]]
    ) -> None:
        """A failed document keeps its original bytes whatever the retention setting says."""
        repository = await open_repository(retain_bytes=False)
        document = await repository.add(
            _TENANT, _upload("xxe.docx", _BOMB, breach=Breach.XML_DTD_OR_ENTITY),
            scope="all", now=_at(0),
        )  # fmt: skip
        assert document.bytes_retained
        assert await repository.original(_TENANT, document.id) == _BOMB

    async def test_a_breach_is_reindexed_only_by_hand(self, repository: DocumentRepository) -> None:
        """Re-index returns it to the queue (the worker then checks the package again)."""
        document = await repository.add(
            _TENANT, _upload("bomb.docx", _BOMB, breach=Breach.ZIP_ENTRY_COUNT),
            scope="all", now=_at(0),
        )  # fmt: skip
        again = await repository.reindex(_TENANT, document.id, now=_at(1))
        assert again is not None
        assert again.state is DocumentState.PENDING
        assert await _claim_all(repository, _TENANT, at=2) == [document.id]

    async def test_a_breach_still_counts_as_the_tenants_content(
        self, repository: DocumentRepository
    ) -> None:
        """Listed under Failed for review, and the same bytes again are a named duplicate."""
        upload = _upload("bomb.docx", _BOMB, breach=Breach.ZIP_INFLATED_SIZE)
        await repository.add(_TENANT, upload, scope="all", now=_at(0))
        search = await repository.search_documents(
            _TENANT, DocumentSearch(states=frozenset({DocumentState.FAILED}))
        )
        assert [d.title for d in search.documents] == ["bomb.docx"]
        with pytest.raises(DocumentRefusedError) as refused:
            await repository.add(_TENANT, upload, scope="all", now=_at(1))
        assert refused.value.refusal is DocumentRefusal.DUPLICATE_DOCUMENT
        assert refused.value.detail == "bomb.docx"

    async def test_fail_with_a_breach_records_it_and_success_clears_it(
        self, repository: DocumentRepository
    ) -> None:
        """A re-extracted package that breaks a limit fails naming it; a success forgets it."""
        document = await repository.add(
            _TENANT, _upload("report.txt", b"Quarterly report."), scope="all", now=_at(0)
        )
        (claim,) = await repository.claim(
            _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(1)
        )
        assert await repository.fail(
            claim,
            DocumentRefusal.MALFORMED_DOCUMENT,
            retry=False,
            now=_at(2),
            breach=Breach.ZIP_STRUCTURE,
        )
        failed = await repository.get(_TENANT, document.id)
        assert failed is not None
        assert (failed.failure, failed.failure_breach) == (
            DocumentRefusal.MALFORMED_DOCUMENT,
            Breach.ZIP_STRUCTURE,
        )
        assert failed.remedy == BREACH_REMEDIES[Breach.ZIP_STRUCTURE]
        assert await repository.reindex(_TENANT, document.id, now=_at(3)) is not None
        (retry,) = await repository.claim(
            _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(4)
        )
        body = "Quarterly report."
        content = IndexedContent(
            text=body,
            segments=(StoredSegment(ordinal=0, label="", body=body, indexed=body),),
            findings=(),
            state=DocumentState.INDEXED,
        )
        assert await repository.complete(retry, content, now=_at(5))
        indexed = await repository.get(_TENANT, document.id)
        assert indexed is not None
        assert (indexed.failure, indexed.failure_breach, indexed.remedy) == (None, None, None)

    async def test_fail_without_a_breach_has_the_reasons_remedy(
        self, repository: DocumentRepository
    ) -> None:
        """No breach: ``failure_breach`` stays None and the remedy is the reason's."""
        document = await repository.add(
            _TENANT, _upload("damaged.txt", b"Damaged."), scope="all", now=_at(0)
        )
        (claim,) = await repository.claim(
            _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(1)
        )
        refusal = DocumentRefusal.PASSWORD_PROTECTED
        assert await repository.fail(claim, refusal, retry=False, now=_at(2))
        failed = await repository.get(_TENANT, document.id)
        assert failed is not None
        assert (failed.failure_breach, failed.remedy) == (None, REMEDIES[refusal])

    async def test_the_uploader_filter_is_exact_and_confined_to_the_tenant(
        self, repository: DocumentRepository
    ) -> None:
        """``uploader`` matches the recorded subject exactly: no prefix, no pattern."""
        uploads = (
            (_TENANT, "a.txt", "alice@example.com"),
            (_TENANT, "b.txt", "alice@example.com.evil"),
            (_TENANT, "c.txt", "bob@example.com"),
            (_TENANT, "d.txt", None),
            (_OTHER, "e.txt", "alice@example.com"),
        )
        for at, (tenant, name, uploader) in enumerate(uploads):
            await repository.add(
                tenant, _upload(name, name.encode()), scope="all", now=_at(at),
                uploaded_by=uploader,
            )  # fmt: skip

        async def titles(uploader: str) -> list[str]:
            page = await repository.search_documents(_TENANT, DocumentSearch(uploader=uploader))
            return [d.title for d in page.documents]

        assert await titles("alice@example.com") == ["a.txt"]
        assert await titles("bob@example.com") == ["c.txt"]
        assert await titles("alice%") == []
        assert await titles("ALICE@EXAMPLE.COM") == []
        page = await repository.search_documents(_TENANT, DocumentSearch())
        assert {d.title: d.uploaded_by for d in page.documents} == {
            "a.txt": "alice@example.com",
            "b.txt": "alice@example.com.evil",
            "c.txt": "bob@example.com",
            "d.txt": None,
        }
