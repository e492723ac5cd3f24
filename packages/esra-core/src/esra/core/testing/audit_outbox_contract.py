"""The reusable contract of a durable audit outbox's rows that this version cannot decode.

A held row that does not decode — a hand edit, a truncated write, a record of the wrong
shape — must cost only itself: the outbox sets it aside (kept, never delivered again), the
audit sink is handed an ``esra.audit.outbox_row_set_aside`` record naming the row and a
digest of its stored text, and the records behind it are delivered. A row whose only
problem is an event or a field this version does not know was written by a newer ESRA
during a rolling upgrade: it stays held for a newer host to deliver, and the records behind
it are delivered meanwhile.

An adapter's test module subclasses ``AuditOutboxPoisonContract`` and implements
``make_outbox`` (a fresh, empty outbox, or an awaitable of one), ``plant`` (store a row
holding exactly ``text`` as the outbox stores a record, returning its row id) and
``stored_row_ids`` (every row still stored, set aside or not, in order); an engine that
keeps no text (``jsonb``) overrides ``stored_text``, the text the digest is taken of.
Handles are closed after the test through their ``close()``, if they have one. Requires
``pytest`` and ``pytest-asyncio``. The in-memory outbox holds records, not text, and has
nothing to plant.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from esra.core._admin.audit_outbox import AuditOutbox, forward_audit_outbox
from esra.core._audit.codec import record_document
from esra.core._audit.record import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.testing._fakes import InMemoryAuditSink

__all__ = ["AuditOutboxPoisonContract", "held_record", "newer_record_text", "record_text"]

_T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

# Never to appear in a log line: what an undecodable row holds is not logged.
_CONTENT_MARKER = "poison-content-marker"


def held_record(n: int) -> AuditRecord:
    """A decodable record, the ``n``-th planted."""
    return AuditRecord(
        event=AuditEvent.ADMIN_EXPOSURE_PUBLISH,
        tenant_id="acme",
        correlation_id=f"admin:poison-{n}",
        at=_T0 + timedelta(minutes=n),
        dimensions={"subject": "alice", "version": n},
    )


def record_text(record: AuditRecord) -> str:
    """``record`` as an outbox stores it."""
    return json.dumps(record_document(record), sort_keys=True)


def newer_record_text(**changes: object) -> str:
    """A record as a newer ESRA might write it: well formed, with ``changes`` applied."""
    document = record_document(held_record(99))
    document.update(changes)
    return json.dumps(document, sort_keys=True)


class _RefusingSink:
    """Refuses every record, as an audit sink that is down."""

    async def record(self, record: AuditRecord) -> None:
        raise ConnectionError


@pytest.mark.asyncio
class AuditOutboxPoisonContract:
    """Tests every durable ``AuditOutbox`` must pass; subclass and implement the three hooks."""

    def make_outbox(self, tmp_path: Path) -> AuditOutbox | Awaitable[AuditOutbox]:
        """Return a fresh, empty outbox living under ``tmp_path`` (an empty directory)."""
        raise NotImplementedError

    async def plant(self, outbox: AuditOutbox, text: str) -> int:
        """Store a row holding ``text`` as a held record; return its row id."""
        raise NotImplementedError

    async def stored_row_ids(self, outbox: AuditOutbox) -> list[int]:
        """Every row the outbox still stores, set aside or held, by row id."""
        raise NotImplementedError

    @pytest.fixture
    async def outbox(self, tmp_path: Path) -> AsyncIterator[AuditOutbox]:
        made = self.make_outbox(tmp_path)
        outbox = await made if inspect.isawaitable(made) else made
        yield outbox
        close = getattr(outbox, "close", None)
        result = close() if callable(close) else None
        if inspect.isawaitable(result):
            await result

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param(f'["{_CONTENT_MARKER}", "a", "record"]', id="not-an-object"),
            pytest.param(
                f'{{"event": "esra.fetch", "tenant_id": "{_CONTENT_MARKER}"}}',
                id="fields-missing",
            ),
            pytest.param(newer_record_text(at="yesterday"), id="a-bad-time"),
        ],
    )
    async def test_an_undecodable_row_is_set_aside_and_the_records_behind_it_delivered(
        self, outbox: AuditOutbox, text: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        await self.plant(outbox, record_text(held_record(1)))
        poison = await self.plant(outbox, text)
        await self.plant(outbox, record_text(held_record(2)))
        sink = InMemoryAuditSink()
        with caplog.at_level(logging.ERROR):
            assert await forward_audit_outbox(outbox, sink) == 3
        first, set_aside, second = sink.records
        assert (first, second) == (held_record(1), held_record(2))
        assert set_aside.event is AuditEvent.AUDIT_OUTBOX_ROW_SET_ASIDE
        assert set_aside.outcome == "failed"
        assert set_aside.dimensions["row_id"] == poison
        stored = await self.stored_text(outbox, poison, text)
        assert set_aside.dimensions["sha256"] == hashlib.sha256(stored.encode()).hexdigest()
        # Logged by row id, never by what the row holds.
        assert any(str(poison) in line for line in caplog.messages)
        assert not any(_CONTENT_MARKER in line for line in caplog.messages)
        assert _CONTENT_MARKER not in repr(set_aside)
        # Kept, not lost; never handed out (or reported) again.
        assert await self.stored_row_ids(outbox) == [poison]
        assert await outbox.pending_audit() == []
        assert await forward_audit_outbox(outbox, sink) == 0
        assert len(sink.records) == 3

    async def stored_text(self, outbox: AuditOutbox, row_id: int, planted: str) -> str:
        """The text a set-aside record's digest is of: row ``row_id``'s as the engine stores
        it (by default ``planted``, as given)."""
        del outbox, row_id
        return planted

    async def test_a_set_aside_report_the_sink_refuses_leaves_the_row_held_for_the_next(
        self, outbox: AuditOutbox
    ) -> None:
        poison = await self.plant(outbox, '["not", "a", "record"]')
        await self.plant(outbox, record_text(held_record(1)))
        with pytest.raises(ConnectionError):
            await forward_audit_outbox(outbox, _RefusingSink())
        sink = InMemoryAuditSink()
        assert await forward_audit_outbox(outbox, sink) == 2
        set_aside, first = sink.records
        assert set_aside.dimensions["row_id"] == poison
        assert first == held_record(1)
        assert await forward_audit_outbox(outbox, sink) == 0

    @pytest.mark.parametrize(
        "text",
        [
            pytest.param(newer_record_text(event="esra.from.a.newer.version"), id="event"),
            pytest.param(newer_record_text(attested_by="host-7"), id="field"),
        ],
    )
    async def test_a_row_of_a_newer_version_waits_for_it_without_blocking_the_rest(
        self, outbox: AuditOutbox, text: str
    ) -> None:
        await self.plant(outbox, record_text(held_record(1)))
        newer = await self.plant(outbox, text)
        await self.plant(outbox, record_text(held_record(2)))
        sink = InMemoryAuditSink()
        assert await forward_audit_outbox(outbox, sink) == 2
        assert sink.records == [held_record(1), held_record(2)]
        # Still held (not set aside, not reported): a newer host delivers it.
        assert await self.stored_row_ids(outbox) == [newer]
        assert await forward_audit_outbox(outbox, sink) == 0
        assert not any(r.event is AuditEvent.AUDIT_OUTBOX_ROW_SET_ASIDE for r in sink.records)
