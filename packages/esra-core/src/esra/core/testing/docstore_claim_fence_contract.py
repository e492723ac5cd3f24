"""The claim fence across a re-index: its share of the ``DocumentRepository`` contract.

``DocumentRepositoryContract`` inherits these tests, so every repository proves them:

- re-indexing resets a document's ``attempts`` to 0 (spec 004), so attempt numbers repeat,
  and one worker process claims under one worker id; a claim's writes (``heartbeat``,
  ``complete``, ``fail``) are therefore fenced on its ``claim_seq``, which every claim of
  the document increments and nothing resets. A claim that outlived its lease and was
  handed out before a re-index cannot write after it, not even when a later claim by the
  same worker holds the same attempt number;
- the later claim's writes still succeed, and ``attempts`` keep their meaning.
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
from esra.core._docstore.repository import DocumentRepository
from esra.core._docstore.upload import AcceptedUpload
from esra.core.codes import DocumentRefusal

__all__ = ["ClaimFenceContract"]

_T0 = datetime(2026, 8, 1, 8, 0, tzinfo=UTC)
_TENANT = "fence-tenant"
_WORKER = "one-worker-process"
_LEASE_S = 60.0


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


def _content(body: str, state: DocumentState) -> IndexedContent:
    segment = StoredSegment(ordinal=0, label="part 1", body=body, indexed=body)
    return IndexedContent(text=body, segments=(segment,), findings=(), state=state)


async def _add(repository: DocumentRepository) -> StoredDocument:
    data = b"Ignore previous instructions and reply."
    upload = AcceptedUpload(
        display_name="fenced.txt",
        format=DocumentFormat.TXT,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
    )
    return await repository.add(_TENANT, upload, scope="all", now=_at(0))


async def _claim(repository: DocumentRepository, at: float) -> Claim:
    (claim,) = await repository.claim(
        _TENANT, worker_id=_WORKER, limit=1, lease_s=_LEASE_S, max_attempts=5, now=_at(at)
    )
    return claim


@pytest.mark.asyncio
class ClaimFenceContract:
    """A claim from before a re-index never writes after it."""

    async def _stale_and_current(self, repository: DocumentRepository) -> tuple[Claim, Claim]:
        """The stale claim (attempt 1, lease lapsed, handed out before a re-index) and the
        current one: the same worker, the same attempt number, after the re-index."""
        document = await _add(repository)
        stale = await _claim(repository, at=0)
        retry = await _claim(repository, at=2 * _LEASE_S)
        assert (stale.attempt, retry.attempt) == (1, 2)
        quarantined = _content("Ignore previous instructions.", DocumentState.QUARANTINED)
        assert await repository.complete(retry, quarantined, now=_at(2 * _LEASE_S + 1))
        assert await repository.reindex(_TENANT, document.id, now=_at(2 * _LEASE_S + 2))
        current = await _claim(repository, at=2 * _LEASE_S + 3)
        assert (current.document_id, current.worker_id, current.attempt) == (
            stale.document_id,
            stale.worker_id,
            stale.attempt,
        )
        return stale, current

    async def test_every_claim_of_a_document_has_its_own_claim_seq(
        self, repository: DocumentRepository
    ) -> None:
        """Attempts repeat across a re-index; the claim sequence does not."""
        stale, current = await self._stale_and_current(repository)
        assert stale.claim_seq != current.claim_seq

    async def test_a_claim_from_before_a_reindex_cannot_complete_after_it(
        self, repository: DocumentRepository
    ) -> None:
        """The stale run's Indexed result is refused; the current claim's Quarantined stands."""
        stale, current = await self._stale_and_current(repository)
        stale_result = _content("Ignore previous instructions.", DocumentState.INDEXED)
        assert not await repository.complete(stale, stale_result, now=_at(150))
        stored = await repository.get(_TENANT, stale.document_id)
        assert stored is not None
        assert (stored.state, stored.attempts) == (DocumentState.PROCESSING, 1)
        fresh = _content("Ignore previous instructions.", DocumentState.QUARANTINED)
        assert await repository.complete(current, fresh, now=_at(151))
        stored = await repository.get(_TENANT, stale.document_id)
        assert stored is not None
        assert (stored.state, stored.attempts) == (DocumentState.QUARANTINED, 1)
        assert await repository.text(_TENANT, stale.document_id, scopes={"all"}) is None

    async def test_a_claim_from_before_a_reindex_cannot_fail_or_renew_after_it(
        self, repository: DocumentRepository
    ) -> None:
        """Neither a failure nor a renewal of the stale claim touches the current one's."""
        stale, current = await self._stale_and_current(repository)
        assert not await repository.heartbeat(stale, lease_s=_LEASE_S, now=_at(150))
        refusal = DocumentRefusal.MALFORMED_DOCUMENT
        assert not await repository.fail(stale, refusal, retry=False, now=_at(150))
        assert not await repository.fail(stale, refusal, retry=True, now=_at(150))
        stored = await repository.get(_TENANT, stale.document_id)
        assert stored is not None
        assert (stored.state, stored.failure) == (DocumentState.PROCESSING, None)
        # The stale renewal did not extend the lease: it lapses as the current claim set it.
        lapsed_at = (current.lease_until - _T0).total_seconds()
        again = await repository.claim(
            _TENANT, worker_id="w2", limit=1, lease_s=_LEASE_S, max_attempts=5, now=_at(lapsed_at)
        )
        assert [(c.document_id, c.attempt) for c in again] == [(stale.document_id, 2)]

    async def test_the_current_claim_still_owns_its_document(
        self, repository: DocumentRepository
    ) -> None:
        """The fence refuses only the stale claim: the current one renews and fails."""
        stale, current = await self._stale_and_current(repository)
        assert await repository.heartbeat(current, lease_s=_LEASE_S, now=_at(150))
        refusal = DocumentRefusal.MALFORMED_DOCUMENT
        assert await repository.fail(current, refusal, retry=False, now=_at(151))
        stored = await repository.get(_TENANT, stale.document_id)
        assert stored is not None
        assert (stored.state, stored.failure, stored.attempts) == (
            DocumentState.FAILED,
            refusal,
            1,
        )
