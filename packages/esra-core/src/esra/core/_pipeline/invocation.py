"""One call of the pipeline as its stages see it: who calls, when, and what is to be audited.

A stage that acts for the caller — scope resolution, source selection, planning, the answer —
takes the ``Invocation`` (after the first stage, the ``ScopedInvocation`` of
``esra.core._pipeline.scope``, which adds the resolved scope) instead of a context, a clock
and an audit sink apiece. The stages that only compute on values (caller filters,
validation, aggregation, rerank, the response) take those values and nothing else.

A stage never writes to the audit sink: it notes its decisions on the invocation's
``AuditTrail`` (stamped with the tenant, the correlation id and the time of the decision),
and the retriever writes the trail when the stage ends, returned or raised, before anything
reaches the caller. A refusal is therefore audited before its error leaves, as before, and
an audit sink that fails still fails the invocation.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core._clock import Clock
from esra.core._context import InvocationContext
from esra.core.codes import AuditEvent
from esra.core.ports import AuditSink

__all__ = ["AuditTrail", "Invocation"]


class AuditTrail:
    """The audit records an invocation's stages noted, in order, until they are written."""

    def __init__(self, sink: AuditSink, ctx: InvocationContext, clock: Clock) -> None:
        self._sink = sink
        self._ctx = ctx
        self._clock = clock
        self._pending: list[AuditRecord] = []

    def note(
        self,
        event: AuditEvent,
        *,
        outcome: str = "ok",
        reason: str | None = None,
        dimensions: Mapping[str, AuditDimension] | None = None,
    ) -> None:
        """Note a decision now; it is written with the rest of the stage's records."""
        self._pending.append(
            AuditRecord.of(
                self._ctx, self._clock, event, outcome=outcome, reason=reason, dimensions=dimensions
            )
        )

    async def write(self) -> None:
        """Write every noted record to the sink, in the order noted."""
        if not self._pending:
            return  # most stages note nothing; the retriever asks after every one
        pending, self._pending = self._pending, []
        for record in pending:
            await self._sink.record(record)


@attrs.frozen
class Invocation:
    """One call: the caller's context, the clock it is timed by, and its audit trail."""

    ctx: InvocationContext
    clock: Clock
    audit: AuditTrail

    @classmethod
    def start(cls, ctx: InvocationContext, *, clock: Clock, audit: AuditSink) -> Invocation:
        """The invocation of ``ctx``, auditing to ``audit``."""
        return cls(ctx=ctx, clock=clock, audit=AuditTrail(audit, ctx, clock))
