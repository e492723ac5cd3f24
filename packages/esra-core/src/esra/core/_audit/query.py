"""Reading audit back: the query model, its keyset cursor and the ``AuditReader`` port.

Every query names one tenant and every reader filters by it in the store itself, so one
tenant never reads another's records. Records come newest first, ordered by ``(at, seq)``
where ``seq`` is the store's own insertion number (the tie-breaker for records stamped with
the same instant); a page's ``next_cursor`` is the position of its last record, opaque to
callers, and the next page starts strictly after it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Protocol

import attrs

from esra.core._audit.record import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.exceptions import InvalidRequestError

__all__ = [
    "CALLER_DIMENSIONS",
    "DEFAULT_AUDIT_LIMIT",
    "MAX_AUDIT_LIMIT",
    "AuditCursor",
    "AuditCursorError",
    "AuditPage",
    "AuditQuery",
    "AuditQueryError",
    "AuditReader",
    "audit_subject",
    "page_of",
]

DEFAULT_AUDIT_LIMIT = 100
MAX_AUDIT_LIMIT = 1000
# The dimensions that name who acted: administrative services record ``subject``, the
# document store ``operator``. The caller filter matches either.
CALLER_DIMENSIONS = ("subject", "operator")


class AuditQueryError(InvalidRequestError):
    """An audit query is malformed (a limit out of range, ``since`` after ``until``, ...)."""

    public_message = "The audit query is invalid."


class AuditCursorError(AuditQueryError):
    """A pagination cursor was not one a reader issued."""

    public_message = "The audit cursor is invalid."


def audit_subject(record: AuditRecord) -> str | None:
    """Who acted in ``record`` (its ``subject`` or ``operator`` dimension), if it says."""
    for name in CALLER_DIMENSIONS:
        value = record.dimensions.get(name)
        if isinstance(value, str):
            return value
    return None


_MAX_SEQ = 2**63 - 1


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        msg = "audit query times must be timezone-aware"
        raise AuditQueryError(msg)
    try:
        return moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-14:00 is past datetime.max in UTC
        msg = "audit query time out of range"
        raise AuditQueryError(msg) from None


@attrs.frozen
class AuditCursor:
    """A position in a tenant's audit: after the record stamped ``at`` with number ``seq``."""

    at: datetime
    seq: int

    def encode(self) -> str:
        """The opaque text form handed to callers."""
        raw = json.dumps({"at": self.at.astimezone(UTC).isoformat(), "seq": self.seq})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> AuditCursor:
        """Parse a cursor from ``encode``.

        Raises:
            AuditCursorError: anything else.
        """
        try:
            padded = text + "=" * (-len(text) % 4)
            document = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
            at = datetime.fromisoformat(document["at"])
            seq = document["seq"]
        except (ValueError, KeyError, TypeError, UnicodeError, binascii.Error, RecursionError):
            # RecursionError: "[[[…" nests past the decoder's limit; no cursor issued does.
            raise AuditCursorError from None
        if at.tzinfo is None or not isinstance(seq, int) or isinstance(seq, bool):
            raise AuditCursorError
        if not 0 <= seq <= _MAX_SEQ:  # a record number is a signed 64-bit integer
            raise AuditCursorError
        try:
            return cls(at.astimezone(UTC), seq)
        except OverflowError:  # a time valid where written, out of range in UTC
            raise AuditCursorError from None


def _events(value: Collection[AuditEvent | str]) -> frozenset[AuditEvent]:
    try:
        return frozenset(AuditEvent(v) for v in value)
    except ValueError:
        msg = "unknown audit event name"
        raise AuditQueryError(msg) from None


@attrs.frozen
class AuditQuery:
    """Which of one tenant's records to read.

    ``events`` empty means every event; ``since`` is inclusive, ``until`` exclusive; both
    must be timezone-aware. ``subject`` matches the record's caller (``audit_subject``).

    Raises:
        AuditQueryError: a limit outside 1..``MAX_AUDIT_LIMIT``, ``since`` not before
            ``until``, a naive time, an unknown event or an empty tenant.
    """

    tenant_id: str
    events: frozenset[AuditEvent] = attrs.field(default=frozenset(), converter=_events)
    subject: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    correlation_id: str | None = None
    limit: int = DEFAULT_AUDIT_LIMIT
    cursor: AuditCursor | None = None

    def __attrs_post_init__(self) -> None:
        if not self.tenant_id:
            msg = "an audit query names its tenant"
            raise AuditQueryError(msg)
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_AUDIT_LIMIT:
            msg = f"the limit must be between 1 and {MAX_AUDIT_LIMIT}"
            raise AuditQueryError(msg)
        since = _utc(self.since) if self.since is not None else None
        until = _utc(self.until) if self.until is not None else None
        if since is not None and until is not None and since >= until:
            msg = "since must be before until"
            raise AuditQueryError(msg)
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "until", until)

    def matches(self, record: AuditRecord) -> bool:
        """Whether ``record`` passes every filter but the cursor (for readers without SQL)."""
        at = record.at.astimezone(UTC)
        return (
            record.tenant_id == self.tenant_id
            and (not self.events or record.event in self.events)
            and (self.subject is None or audit_subject(record) == self.subject)
            and (self.correlation_id is None or record.correlation_id == self.correlation_id)
            and (self.since is None or at >= self.since)
            and (self.until is None or at < self.until)
        )

    def after_cursor(self, at: datetime, seq: int) -> bool:
        """Whether the record at ``(at, seq)`` comes after the cursor, newest first."""
        if self.cursor is None:
            return True
        return (at.astimezone(UTC), seq) < (self.cursor.at, self.cursor.seq)


@attrs.frozen
class AuditPage:
    """One page of records, newest first, and where the next page starts (None: no more)."""

    records: Sequence[AuditRecord]
    next_cursor: AuditCursor | None = None


class AuditReader(Protocol):
    """**Protocol:** reads one tenant's audit records back (newest first, keyset paged)."""

    async def query(self, query: AuditQuery) -> AuditPage:
        """The page of ``query.tenant_id``'s records ``query`` selects."""
        ...


def page_of(entries: Sequence[tuple[AuditRecord, int]], limit: int) -> AuditPage:
    """The page for ``entries`` — up to ``limit + 1`` ``(record, seq)`` pairs, newest first.

    A reader fetches one row more than the limit: its presence is what says a next page
    exists, so the last page never hands out a cursor to an empty one.
    """
    kept = list(entries[:limit])
    cursor = None
    if len(entries) > limit and kept:
        last, seq = kept[-1]
        cursor = AuditCursor(last.at.astimezone(UTC), seq)
    return AuditPage(records=tuple(record for record, _ in kept), next_cursor=cursor)
