"""AuditRecord: one audited fact; the tenant is on every record, denials included."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from esra.core.codes import AuditEvent

if TYPE_CHECKING:
    from esra.core._clock import Clock
    from esra.core._context import InvocationContext

__all__ = ["AuditDimension", "AuditRecord"]

AuditDimension = str | int | float | bool | tuple[str, ...] | None


@attrs.frozen
class AuditRecord:
    """An audit record. ``dimensions`` never hold prompts, claim values, SQL or driver text."""

    event: AuditEvent
    tenant_id: str
    correlation_id: str
    at: datetime
    outcome: str = "ok"
    reason: str | None = None
    dimensions: Mapping[str, AuditDimension] = attrs.field(factory=dict)

    @classmethod
    def of(
        cls,
        ctx: InvocationContext,
        clock: Clock,
        event: AuditEvent,
        *,
        outcome: str = "ok",
        reason: str | None = None,
        dimensions: Mapping[str, AuditDimension] | None = None,
    ) -> AuditRecord:
        """Build a record for the invocation in ``ctx``: its tenant and correlation id, now."""
        return cls(
            event=event,
            tenant_id=ctx.tenant_id,
            correlation_id=ctx.correlation_id,
            at=clock.now(),
            outcome=outcome,
            reason=reason,
            dimensions=dict(dimensions or {}),
        )
