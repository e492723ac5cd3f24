"""Queue statistics: their share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them:

- ``queue_stats`` counts the tenant's Pending, non-deleted documents only — not another
  tenant's, nor a claimed, indexed, failed or deleted one;
- its ``oldest_queued_at`` is when the longest-waiting one entered the queue: its upload,
  or the retry or reindex that returned it, whichever came last;
- an empty queue is zero documents and no time.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.model import (
    Claim,
    DocumentState,
    IndexedContent,
    StoredDocument,
    StoredSegment,
)
from esra.core._docstore.queue_stats import QueueStats
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["QueueStatsContract"]

_T0 = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
_TENANT = "queue-tenant"
_OTHER = "queue-other"
_CONTENT = IndexedContent(
    text="Done.",
    segments=(StoredSegment(ordinal=0, label="part 1", body="Done.", indexed="Done."),),
    findings=(),
    state=DocumentState.INDEXED,
)


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


async def _add(
    repository: DocumentRepository, name: str, at: float, *, tenant: str = _TENANT
) -> StoredDocument:
    data = f"The body of {name}.".encode()
    upload = AcceptedUpload(
        display_name=name,
        format=DocumentFormat.TXT,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
    )
    return await repository.add(tenant, upload, scope="all", now=_at(at))


async def _claim_one(repository: DocumentRepository, at: float) -> Claim:
    (claim,) = await repository.claim(
        _TENANT, worker_id="w", limit=1, lease_s=60.0, max_attempts=3, now=_at(at)
    )
    return claim


@pytest.mark.asyncio
class QueueStatsContract:
    """How many documents wait in a tenant's queue, and since when."""

    async def test_an_empty_queue_waits_for_nothing(self, repository: DocumentRepository) -> None:
        """No document at all: zero waiting, no oldest time."""
        assert await repository.queue_stats(_TENANT) == QueueStats(0, None)

    async def test_only_the_tenants_live_pending_documents_wait(
        self, repository: DocumentRepository
    ) -> None:
        """Claimed, indexed, failed and deleted documents and another tenant's do not count;
        the oldest waiting one is the earliest still Pending."""
        indexed = await _add(repository, "indexed.txt", at=0)
        failed = await _add(repository, "failed.txt", at=1)
        await _add(repository, "claimed.txt", at=2)
        deleted = await _add(repository, "deleted.txt", at=3)
        await _add(repository, "first-waiting.txt", at=10)
        await _add(repository, "second-waiting.txt", at=20)
        await _add(repository, "theirs.txt", at=4, tenant=_OTHER)
        claim = await _claim_one(repository, at=30)
        assert claim.document_id == indexed.id
        assert await repository.complete(claim, _CONTENT, now=_at(31))
        claim = await _claim_one(repository, at=32)
        assert claim.document_id == failed.id
        refusal = DocumentRefusal.PASSWORD_PROTECTED
        assert await repository.fail(claim, refusal, retry=False, now=_at(33))
        await _claim_one(repository, at=34)  # claimed.txt, held under a live lease
        assert await repository.soft_delete(_TENANT, deleted.id, now=_at(35))
        assert await repository.queue_stats(_TENANT) == QueueStats(2, _at(10))
        assert await repository.queue_stats(_OTHER) == QueueStats(1, _at(4))

    async def test_a_retried_or_reindexed_document_waits_from_its_return(
        self, repository: DocumentRepository
    ) -> None:
        """Returned to the queue, a document waits from that moment, not from its upload."""
        retried = await _add(repository, "retried.txt", at=0)
        reindexed = await _add(repository, "reindexed.txt", at=1)
        claim = await _claim_one(repository, at=2)
        assert claim.document_id == retried.id
        assert await repository.fail(
            claim, DocumentRefusal.MALFORMED_DOCUMENT, retry=True, now=_at(50)
        )
        claim = await _claim_one(repository, at=60)
        assert claim.document_id == retried.id  # the queue's order is still by upload
        assert await repository.complete(claim, _CONTENT, now=_at(61))
        assert await repository.queue_stats(_TENANT) == QueueStats(1, _at(1))
        claim = await _claim_one(repository, at=62)
        assert claim.document_id == reindexed.id
        assert await repository.complete(claim, _CONTENT, now=_at(63))
        assert await repository.queue_stats(_TENANT) == QueueStats(0, None)
        assert await repository.reindex(_TENANT, reindexed.id, now=_at(100)) is not None
        assert await repository.queue_stats(_TENANT) == QueueStats(1, _at(100))
        assert await repository.fail(
            await _claim_one(repository, at=101),
            DocumentRefusal.MALFORMED_DOCUMENT,
            retry=True,
            now=_at(120),
        )
        assert await repository.queue_stats(_TENANT) == QueueStats(1, _at(120))
