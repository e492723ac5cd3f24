"""What an audit outbox hands out for a held row, whatever the row holds.

Every engine's outbox keeps each held record as its JSON document, and hands the oldest one
out under a claim. A row that did not decode stopped every forward, from every host, for
good, with every later record (every tenant's) held behind it. So each row is read here,
the same way on every engine, as one of three:

- a record: delivered, then deleted;
- not a record (not JSON, the wrong shape, values that do not decode — a hand edit, a
  truncated write): an ``esra.audit.outbox_row_set_aside`` record is handed out in its
  place, naming the outbox and the row and carrying a SHA-256 of its stored text, never what
  it holds (nor the tenant it claims: that is its text too). Once the sink took that report
  the row is set aside — kept, its ``correlation_id`` prefixed ``set-aside:`` — and never
  handed out again;
- a newer ESRA's record, whose only problem is an event or a top-level field this version
  does not know (a rolling upgrade): passed over, held for a newer host to deliver, and
  never blocking the rows behind it.

Rows are logged by id only.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from esra.core._audit.codec import record_document, record_from_document
from esra.core._audit.record import AuditRecord
from esra.core.codes import AuditEvent

__all__ = ["SET_ASIDE_PREFIX", "HeldRow", "read_held_row"]

_log = logging.getLogger(__name__)

# Marks a row set aside: no record's correlation id starts so (``admin:``, ``esra.…:``).
SET_ASIDE_PREFIX = "set-aside:"

# The fields a record's document has; any other was added by a newer ESRA.
_FIELDS = frozenset(
    record_document(
        AuditRecord(event=AuditEvent.FETCH, tenant_id="", correlation_id="", at=datetime.now(UTC))
    )
)
_EVENTS = frozenset(event.value for event in AuditEvent)

# The newer ESRA's rows this process has warned of. Every forward passes over such a row
# again until a newer host delivers it: one warning a row, not one a pass. Bounded: forgotten
# all at once when full, so a row is warned of again at worst, never grows the process.
_WARNED_LIMIT = 4096
_warned: set[tuple[str, int]] = set()


@attrs.frozen
class HeldRow:
    """What a claim hands out for one held row: ``record``, and whether it is the row's own
    (``delivered``: delete the row once the sink took it) or the report of a row that does
    not decode (set the row aside once the sink took the report)."""

    record: AuditRecord
    delivered: bool


def read_held_row(outbox: str, seq: int, document: object, stored: bytes) -> HeldRow | None:
    """What a claim hands out for row ``seq`` of ``outbox``; ``None`` for a newer ESRA's
    record, left held.

    Args:
        outbox: the outbox's name, for the report and the log.
        seq: the row's id.
        document: the row's record as parsed (anything, when the row was tampered with).
        stored: the row's stored text as bytes, which the report's digest is taken of.
    """
    if isinstance(document, Mapping):
        event = document.get("event")
        newer_event = isinstance(event, str) and event not in _EVENTS
        if newer_event or not _FIELDS.issuperset(document):
            known = {name: value for name, value in document.items() if name in _FIELDS}
            if newer_event:
                known["event"] = AuditEvent.FETCH.value  # to check everything else
            if _decodes(known) is not None:
                _warn_once(outbox, seq)
                return None
        else:
            record = _decodes(document)
            if record is not None:
                return HeldRow(record, delivered=True)
    _log.error(
        "audit outbox row %d of %s cannot be decoded; reporting it to the audit sink, then "
        "setting it aside (kept, its correlation id prefixed %r)",
        seq,
        outbox,
        SET_ASIDE_PREFIX,
    )
    return HeldRow(_set_aside_report(outbox, seq, stored), delivered=False)


def _warn_once(outbox: str, seq: int) -> None:
    if (outbox, seq) in _warned:
        return
    if len(_warned) >= _WARNED_LIMIT:
        _warned.clear()
    _warned.add((outbox, seq))
    _log.warning(
        "audit outbox row %d of %s holds an event or a field this version does not know; "
        "left held for a newer ESRA host to deliver (warned once per process)",
        seq,
        outbox,
    )


def _decodes(document: Mapping[str, Any]) -> AuditRecord | None:
    try:
        return record_from_document(document)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _set_aside_report(outbox: str, seq: int, stored: bytes) -> AuditRecord:
    return AuditRecord(
        event=AuditEvent.AUDIT_OUTBOX_ROW_SET_ASIDE,
        tenant_id="",
        correlation_id=f"{SET_ASIDE_PREFIX}{outbox}:{seq}",
        at=datetime.now(UTC),
        outcome="failed",
        reason="undecodable",
        dimensions={"outbox": outbox, "row_id": seq, "sha256": hashlib.sha256(stored).hexdigest()},
    )
