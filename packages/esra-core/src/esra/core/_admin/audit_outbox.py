"""The audit outbox: an administrative change and its audit record are saved together.

A change is saved to the state database and its record then handed to the audit sink. Were
the record sent only after the save, a process killed (or a sink failing) in between would
leave the change applied with no record. So the record is written into the state database's
outbox **in the same transaction as the change** (``WorkspaceStore.save(..., audit=)``):
either both are stored or neither is. ``forward_audit_outbox`` then hands every held record
to the audit sink and deletes it from the outbox only once the sink has taken it
(``record()`` returned: with ``wait_for_write``, the host's default, once it is written).

The chain forwards after each change; a host forwards at startup, so records held by a
process that died are delivered by the next one. A process killed between the sink taking a
record and its deletion delivers it once more: the duplicate carries the same
``correlation_id`` (``admin:<uuid>``, unique to the one administrative record), so an audit
reader recognises it as the same record.

The outbox is used even where the audit log lives in the same database: the host's audit
sink may as well be a JSON Lines file or a logger, and the sink (batching, trace linking) is
the one path every record takes.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Protocol

from esra.core._audit.record import AuditRecord
from esra.core.ports import AuditSink

__all__ = ["AuditOutbox", "forward_audit_outbox"]

_log = logging.getLogger(__name__)

# One drain at a time per outbox in this process, so two changes finishing together do not
# hand the same held record to the sink twice.
_draining: weakref.WeakKeyDictionary[AuditOutbox, asyncio.Lock] = weakref.WeakKeyDictionary()


class AuditOutbox(Protocol):
    """**Protocol:** audit records held in the state database until the audit sink has them."""

    async def pending_audit(self) -> list[AuditRecord]:
        """Every held record, every tenant's, in the order they were saved."""
        ...

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the held record with ``correlation_id`` (none held: nothing happens)."""
        ...


async def forward_audit_outbox(outbox: AuditOutbox, sink: AuditSink) -> int:
    """Hand every held record to ``sink`` in order, deleting each once the sink took it.

    Returns how many were delivered. Stops at the first record the sink refuses, which stays
    held (with every later one) for the next forward.

    Raises:
        Exception: whatever ``sink.record`` or the outbox raised; what was delivered before
            it is deleted from the outbox already.
    """
    lock = _draining.setdefault(outbox, asyncio.Lock())
    delivered = 0
    async with lock:
        for record in await outbox.pending_audit():
            await sink.record(record)
            await outbox.settle_audit(record.correlation_id)
            delivered += 1
    if delivered:
        _log.debug("forwarded %d held audit records", delivered)
    return delivered
