"""The audit outbox: an administrative change and its audit record are saved together.

A change is saved to the state database and its record then handed to the audit sink. Were
the record sent only after the save, a process killed (or a sink failing) in between would
leave the change applied with no record. So the record is written into the state database's
outbox **in the same transaction as the change** (``WorkspaceStore.save(..., audit=)``):
either both are stored or neither is. ``forward_audit_outbox`` then hands every held record
to the audit sink and deletes it from the outbox only once the sink has taken it
(``record()`` returned: with ``wait_for_write``, the host's default, once it is written).

The chain forwards after each change; a host forwards at startup, so records held by a
process that died are delivered by the next one, and a serving host forwards on a timer
(``AuditOutboxForwarder``), so a record held while the sink was failing is delivered once the
sink takes records again, without waiting for another change. A process killed between the
sink taking a record and its deletion delivers it once more: the duplicate carries the same
``correlation_id`` (``admin:<uuid>``, unique to the one administrative record), so an audit
reader recognises it as the same record.

**One forwarder at a time.** Every process on a state database forwards (after its changes,
at its start, on its timer), often at once. A record is therefore forwarded only under the
outbox's claim (``AuditOutbox.claim_audit``): the store hands the oldest held record to one
claimant at a time, across processes, and deletes it when the claimant's block completes —
the sink took it — or leaves it held when the block raises. A process that finds the outbox
claimed skips the forward: the claimant is delivering, and one record at a time in order, it
also delivers what was saved meanwhile. A claim ends with its holder: a process killed, or
whose connection died, mid-forward never keeps the others from forwarding (the PostgreSQL
store's claim is a transaction-scoped advisory lock, the SQLite store's a lock on a file
beside the database, both released with their holder). The one record whose claimant died
after the sink took it is delivered again, as above. Within a process, one forward at a time
per outbox (an ``asyncio.Lock``): a change's forward waits for the timer's.

A document store's repository is an outbox too (``DocumentRepository``): an operator's
release, reindex or delete holds its record in the store's own database with the action. Its
records' correlation ids (``<event>:<document id>``) are shared by two actions on one
document, so a forward tells a record handed out again from the next one by the whole
record, and leaves one handed out again held rather than deleting it.

A document store's lifecycle holds its records in the state database's outbox, with the
store state it writes (``StoreStateTable.write_store_state(..., audit=)``): the same outbox as
configuration changes, with the same ``admin:<uuid>`` correlation ids.

The outbox is used even where the audit log lives in the same database: the host's audit
sink may as well be a JSON Lines file or a logger, and the sink (batching, trace linking) is
the one path every record takes.

**A row that cannot be decoded costs only itself.** A durable outbox holds records as JSON
text, which a hand edit, a truncated write or another writer may leave undecodable; handed
out first on every claim, such a row once stopped every forward and every record behind it,
every tenant's. A claim instead hands out, for a row that is not a record (no JSON, the
wrong shape), an ``esra.audit.outbox_row_set_aside`` record naming the outbox and the row id
with a digest of its stored text — never its content — and logs an error naming the row;
once the sink took that record the row is set aside (kept in the table for an operator, never
handed out again), and the next claim goes on behind it. A row whose only problem is an event
or a field this version does not know was written by a newer ESRA during a rolling upgrade:
the claim passes over it, held for a newer host to deliver, to the next row. The in-memory
outbox holds records, not text, so it holds nothing undecodable.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from esra.core._audit.record import AuditRecord
from esra.core.ports import AuditSink

__all__ = [
    "DEFAULT_AUDIT_FORWARD_S",
    "AuditOutbox",
    "AuditOutboxForwarder",
    "forward_audit_outbox",
]

_log = logging.getLogger(__name__)

# How often a serving host forwards what the outbox holds, by default.
DEFAULT_AUDIT_FORWARD_S = 30.0

# One drain at a time per outbox in this process, so two changes finishing together do not
# hand the same held record to the sink twice.
_draining: weakref.WeakKeyDictionary[AuditOutbox, asyncio.Lock] = weakref.WeakKeyDictionary()


class _HandedOutAgainError(Exception):
    """Ends a claim on a record already delivered in this forward, leaving it held."""


class AuditOutbox(Protocol):
    """**Protocol:** audit records held in the state database until the audit sink has them."""

    async def pending_audit(self) -> list[AuditRecord]:
        """Every held record, every tenant's, in the order they were saved."""
        ...

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the held record with ``correlation_id`` (none held: nothing happens)."""
        ...

    def claim_audit(self) -> AbstractAsyncContextManager[AuditRecord | None]:
        """Claim the oldest held record for as long as the ``async with`` block runs.

        The block's value is the record, or ``None`` when nothing is held or another claim
        is held — by any process or handle on the same storage — so its holder is
        forwarding. The record is deleted when the block completes (the sink took it) and
        stays held when it raises. The claim ends with the block, and with its holder: a
        process that dies holding it (or whose connection does) releases it.

        A held row that does not decode is never what blocks the rest (see the module
        docstring): one that is no record is handed out as the record reporting it and set
        aside when the block completes; a newer ESRA's record is passed over, left held.
        """
        ...


async def forward_audit_outbox(outbox: AuditOutbox, sink: AuditSink) -> int:
    """Hand every held record to ``sink`` in order, deleting each once the sink took it.

    Each record is claimed (``claim_audit``) while the sink is handed it, so no other
    process forwards it at the same time; where another holds the claim, this forward ends
    (the holder delivers what is held). Returns how many were delivered, a held row's
    set-aside record included. Stops at the first record the sink refuses, which stays held
    (with every later one) for the next forward; a row that cannot be decoded does not stop
    it (the claim reports it, or passes over a newer ESRA's record).

    Raises:
        Exception: whatever ``sink.record`` or the outbox raised; what was delivered before
            it is deleted from the outbox already.
    """
    lock = _draining.setdefault(outbox, asyncio.Lock())
    delivered: list[AuditRecord] = []
    async with lock:
        while True:
            try:
                async with outbox.claim_audit() as record:
                    if record is None:
                        break
                    # A record handed out again in the same forward was not deleted: stop
                    # rather than deliver it over and over, and leave it held (the next
                    # forward tries again). Compared whole, not by correlation id: a document
                    # store's records of two actions on one document share theirs.
                    if record in delivered:
                        raise _HandedOutAgainError
                    await sink.record(record)
            except _HandedOutAgainError:
                break
            delivered.append(record)
    if delivered:
        _log.debug("forwarded %d held audit records", len(delivered))
    return len(delivered)


class AuditOutboxForwarder:
    """Forwards what ``outbox`` holds to ``sink`` every ``interval_s`` seconds, until cancelled.

    A serving host runs one (``run``, as a task it cancels when it stops), so a record held
    while the sink was failing reaches it once the sink takes records again, though no
    further change is made. When nothing is held a forward costs one query. A forward that
    fails is logged by error type and tried again on the next tick.

    Args:
        outbox: the state database's configuration store.
        sink: the audit sink records are forwarded to.
        interval_s: the pause between forwards (positive).

    Raises:
        ValueError: ``interval_s`` is not positive.
    """

    def __init__(
        self,
        outbox: AuditOutbox,
        sink: AuditSink,
        *,
        interval_s: float = DEFAULT_AUDIT_FORWARD_S,
    ) -> None:
        if not interval_s > 0:
            msg = "interval_s must be positive"
            raise ValueError(msg)
        self._outbox = outbox
        self._sink = sink
        self._interval_s = interval_s

    @property
    def interval_s(self) -> float:
        """The pause between forwards: a held record waits at most this once the sink
        takes records again (plus the forward itself)."""
        return self._interval_s

    async def forward(self) -> int:
        """One forward now; returns how many records were delivered (0 when it failed,
        which is logged: the records stay held)."""
        try:
            delivered = await forward_audit_outbox(self._outbox, self._sink)
        except Exception as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # Cancelled, and the clean-up (a rollback on a broken connection) raised in
                # its stead: stopping wins over retrying.
                raise asyncio.CancelledError from exc
            _log.warning(
                "held audit records of administrative changes could not be forwarded (%s); "
                "they stay in the state database, retrying in %g s",
                type(exc).__name__,
                self._interval_s,
            )
            _log.debug("the failed audit outbox forward", exc_info=True)
            return 0
        if delivered:
            _log.info("delivered %d held audit records of administrative changes", delivered)
        return delivered

    async def run(self) -> None:
        """Forward every ``interval_s`` seconds (the first after one pause) until cancelled.

        Cancelled mid-forward, the record being delivered stays held (its claim is released)
        and is delivered by the next forward, here or on another host.
        """
        while True:
            await asyncio.sleep(self._interval_s)
            await self.forward()
