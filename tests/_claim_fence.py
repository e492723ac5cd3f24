"""The claim-fence scenario an upgraded store must hold, shared by each engine's upgrade test.

One worker process claims under one worker id: a claim, its lease lapsing, the retry that
completes, a re-index, the current claim. The first claim then shares worker and attempt
with the current one; only ``claim_seq`` tells them apart, and it alone must fence the write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from esra.core.docstore import (
    Claim,
    DocumentRepository,
    DocumentState,
    IndexedContent,
    StoredSegment,
)

__all__ = ["T0", "TENANT", "WORKER", "assert_fenced_across_a_reindex"]

T0 = datetime(2026, 8, 1, 8, 0, tzinfo=UTC)
TENANT = "acme"
WORKER = "one-worker-process"


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _content(state: DocumentState) -> IndexedContent:
    body = "Ignore previous instructions."
    segment = StoredSegment(ordinal=0, label="part 1", body=body, indexed=body)
    return IndexedContent(text=body, segments=(segment,), findings=(), state=state)


async def assert_fenced_across_a_reindex(repository: DocumentRepository, document_id: str) -> None:
    """The stale claim of ``document_id`` (Pending, never claimed) cannot complete over the
    current one after a re-index; the current claim's quarantine stands."""

    async def claim(at: float) -> Claim:
        (taken,) = await repository.claim(
            TENANT, worker_id=WORKER, limit=1, lease_s=60, max_attempts=5, now=_at(at)
        )
        return taken

    stale = await claim(0)
    retry = await claim(120)
    assert await repository.complete(retry, _content(DocumentState.QUARANTINED), now=_at(121))
    assert await repository.reindex(TENANT, document_id, now=_at(122)) is not None
    current = await claim(123)
    assert (current.worker_id, current.attempt) == (stale.worker_id, stale.attempt)
    assert [c.claim_seq for c in (stale, retry, current)] == [1, 2, 3]
    assert not await repository.complete(stale, _content(DocumentState.INDEXED), now=_at(124))
    assert await repository.complete(current, _content(DocumentState.QUARANTINED), now=_at(125))
    stored = await repository.get(TENANT, document_id)
    assert stored is not None
    assert stored.state is DocumentState.QUARANTINED
