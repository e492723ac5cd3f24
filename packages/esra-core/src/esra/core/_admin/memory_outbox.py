"""InMemoryAuditOutbox: the ``AuditOutbox`` port in a process's memory.

For the in-memory stores that hold an action's audit record with the action
(``InMemoryWorkspaceStore``, ``InMemoryStoreStateTable``): records held by correlation id in
the order they were held, one claim at a time. Each method runs without yielding to the
event loop, so a store's write and the record it holds are one atomic step. It holds the
records themselves, never their text, so none is undecodable: the durable outboxes' rule for
such rows (``esra.core.testing.audit_outbox_contract``) has nothing to apply to here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from esra.core._audit.record import AuditRecord

__all__ = ["InMemoryAuditOutbox"]


class InMemoryAuditOutbox:
    """Held audit records, in a dict; lost with the process."""

    def __init__(self) -> None:
        # Held audit records by correlation id, in the order they were held.
        self._outbox: dict[str, AuditRecord] = {}
        self._claimed = False

    def hold(self, record: AuditRecord) -> None:
        """Hold ``record`` until it is settled (for the store's own writes; call it before
        the write it goes with, so a refusal leaves the write undone).

        Raises:
            ValueError: a record with its correlation id is held already (as the durable
                outboxes' unique correlation id refuses it).
        """
        if record.correlation_id in self._outbox:
            msg = "an audit record with this correlation id is held already"
            raise ValueError(msg)
        self._outbox[record.correlation_id] = record

    async def pending_audit(self) -> list[AuditRecord]:
        """Every held audit record, in the order they were held."""
        return list(self._outbox.values())

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the held record with ``correlation_id``."""
        self._outbox.pop(correlation_id, None)

    @contextlib.asynccontextmanager
    async def claim_audit(self) -> AsyncIterator[AuditRecord | None]:
        """The oldest held record while the block runs, settled when it completes (``None``:
        nothing held, or another claim is running)."""
        if self._claimed or not self._outbox:
            yield None
            return
        self._claimed = True
        try:
            record = next(iter(self._outbox.values()))
            yield record
            await self.settle_audit(record.correlation_id)
        finally:
            self._claimed = False
