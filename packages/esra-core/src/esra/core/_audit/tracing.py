"""Audit records linked to their trace: the trace id on every record of an invocation.

One lookup leads to the other: a span carries the invocation's ``esra.correlation_id``
(``esra.core._telemetry``), and every audit record written while a recorded span is current
carries its ``trace_id`` dimension. Records written outside a trace (no SDK configured, or
not sampled) are left exactly as they were.
"""

from __future__ import annotations

import attrs

from esra.core._audit.record import AuditRecord
from esra.core._telemetry import current_trace_id
from esra.core.ports import AuditSink

__all__ = ["TRACE_ID", "TraceLinkedAuditSink"]

TRACE_ID = "trace_id"


class TraceLinkedAuditSink:
    """An ``AuditSink`` adding the current trace id to each record, then writing it to ``inner``.

    A record that already names a ``trace_id`` keeps its own.
    """

    def __init__(self, inner: AuditSink) -> None:
        self._inner = inner

    @property
    def inner(self) -> AuditSink:
        """The sink records are written to."""
        return self._inner

    async def ping(self) -> None:
        """Raise unless the inner sink accepts records now (one without ``ping()`` always does).

        The administrative chain asks this before a change takes effect; a wrapper that hid
        its inner sink's ``ping()`` would let a change proceed while its record is refused.
        """
        ping = getattr(self._inner, "ping", None)
        if callable(ping):
            await ping()

    async def record(self, record: AuditRecord) -> None:
        """Write ``record`` to the inner sink, with the trace id when a trace is current."""
        trace_id = current_trace_id()
        if trace_id is not None and TRACE_ID not in record.dimensions:
            record = attrs.evolve(record, dimensions={**record.dimensions, TRACE_ID: trace_id})
        await self._inner.record(record)
