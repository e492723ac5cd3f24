"""Keeping one claim's lease alive while its document is being extracted.

A lease covers one document, and extracting a large PDF can outlast it. So while a worker
extracts, a heartbeat renews the claim's lease every ``interval_s`` (a fraction of the
lease). If the worker dies, the renewals stop with it and the lease lapses, so another worker
reclaims the document at its next attempt. Nothing else is held: a slow document never keeps
another one waiting under a lease.

A renewal that finds the claim no longer owns the document ends the heartbeat. By then the
document was reclaimed, or failed at its attempt ceiling, and this worker's result will be
counted as lost. A renewal the store could not take is logged and tried again at the next
beat: the lease still has time left, and the final write is fenced anyway.

Stopping never cancels a renewal that is in flight: the heartbeat finishes it, so no renewal
races the final write that ends the claim.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType

from esra.core._docstore.model import Claim
from esra.core._docstore.repository import DocumentRepository
from esra.core.ports import Clock

__all__ = ["LeaseHeartbeat"]

_log = logging.getLogger(__name__)


class LeaseHeartbeat:
    """Renews ``claim``'s lease every ``interval_s`` while used as ``async with``.

    Args:
        repository: the store holding the claim.
        claim: the claim whose lease is kept alive.
        lease_s: each renewal extends the lease to now plus this.
        interval_s: the time between renewals; shorter than ``lease_s``.
        clock: the time the renewed lease counts from.

    After the block, ``renewals`` counts the renewals the store took and ``lost`` says
    whether one found the claim no longer owning its document.
    """

    def __init__(
        self,
        repository: DocumentRepository,
        claim: Claim,
        *,
        lease_s: float,
        interval_s: float,
        clock: Clock,
    ) -> None:
        self._repository = repository
        self._claim = claim
        self._lease_s = lease_s
        self._interval_s = interval_s
        self._clock = clock
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.renewals = 0
        self.lost = False

    async def __aenter__(self) -> LeaseHeartbeat:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _beat(self) -> None:
        while not await self._stopped_within(self._interval_s):
            try:
                owned = await self._repository.heartbeat(
                    self._claim, lease_s=self._lease_s, now=self._clock.now()
                )
            except Exception:
                _log.warning(
                    "could not renew the lease on document %s of tenant %s; trying again",
                    self._claim.document_id,
                    self._claim.tenant_id,
                    exc_info=True,
                )
                continue
            if not owned:
                self.lost = True
                _log.warning(
                    "lost the lease on document %s of tenant %s (attempt %d): it is no "
                    "longer this worker's",
                    self._claim.document_id,
                    self._claim.tenant_id,
                    self._claim.attempt,
                )
                return
            self.renewals += 1

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return False
        return True
