"""Keeping one claim's lease alive while its document is being extracted.

A lease covers one document, and extracting a large PDF can outlast it. So while a worker
extracts, a heartbeat renews the claim's lease every ``interval_s`` (a fraction of the
lease). If the worker dies, the renewals stop with it and the lease lapses, so another worker
reclaims the document at its next attempt. Nothing else is held: a slow document never keeps
another one waiting under a lease.

A renewal that finds the claim no longer owns the document ends the heartbeat. By then the
document was reclaimed, failed at its attempt ceiling, or re-indexed or deleted by an
operator, and whatever this worker would write for it is refused by the claim fence: so
the work done under the claim (``unless_lost``) is abandoned at once, rather than spending
the worker's time and a sandbox child on a result nobody will take. A renewal the store
could not take is logged and tried again at the next beat: it says nothing of the claim,
the lease still has time left, and the final write is fenced anyway.

Stopping never cancels a renewal that is in flight: the heartbeat finishes it, so no renewal
races the final write that ends the claim.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from types import TracebackType
from typing import TypeVar

from esra.core._docstore.model import Claim
from esra.core._docstore.repository import DocumentRepository
from esra.core.ports import Clock

__all__ = ["LeaseHeartbeat", "LeaseLostError"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


class LeaseLostError(Exception):
    """A renewal found the claim no longer owning its document: the work under it was
    abandoned."""


class LeaseHeartbeat:
    """Renews ``claim``'s lease every ``interval_s`` while used as ``async with``.

    Args:
        repository: the store holding the claim.
        claim: the claim whose lease is kept alive.
        lease_s: each renewal extends the lease to now plus this.
        interval_s: the time between renewals; shorter than ``lease_s``.
        clock: the time the renewed lease counts from.

    After the block, ``renewals`` counts the renewals the store took and ``lost`` says
    whether one found the claim no longer owning its document. Only that answer loses the
    claim: a renewal that raised is tried again at the next beat.
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
        self._lost = asyncio.Event()
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
                self._lost.set()
                _log.warning(
                    "lost the lease on document %s of tenant %s (attempt %d): it is no "
                    "longer this worker's",
                    self._claim.document_id,
                    self._claim.tenant_id,
                    self._claim.attempt,
                )
                return
            self.renewals += 1

    async def unless_lost(self, work: Awaitable[_T]) -> _T:
        """``work``'s result, unless a renewal finds the claim lost first.

        Raises:
            LeaseLostError: the claim was lost before ``work`` ended; ``work`` was cancelled,
                and has ended, when this is raised.
        """
        task = asyncio.ensure_future(work)
        lost = asyncio.create_task(self._lost.wait())
        abandoned = False
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not task.done():  # the claim was lost, or our caller is being cancelled
                abandoned = True
                task.cancel()
                # Awaited, never left running: the work stops its own helpers as it ends.
                await asyncio.wait({task})
        if abandoned:
            if not task.cancelled():
                task.exception()  # whatever it ended with is abandoned with it
            raise LeaseLostError(self._claim.document_id)
        # Ended before the loss was learnt: its write is fenced, and counted lost if refused.
        return task.result()

    async def _stopped_within(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            return False
        return True
