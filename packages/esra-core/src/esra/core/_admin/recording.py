"""How every administrative action is recorded: one audit record, its own correlation id.

Administrative actions are not invocations, so each gets a fresh ``admin:<uuid>``
correlation id; the tenant is the one acted on, and ``dimensions`` name who acted
(``subject``), the role the action needed and what it touched. An administrator acting on a
tenant other than its own is marked ``cross_tenant`` with its ``operator_tenant`` on every
record, denials included: the funnel adds it, so no caller can forget it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from esra.core._admin.roles import Administrator
from esra.core._audit.record import AuditDimension, AuditRecord
from esra.core.codes import AuditEvent
from esra.core.ports import AuditSink, Clock

__all__ = ["admin_action_record", "record_admin_action"]


def admin_action_record(
    clock: Clock,
    event: AuditEvent,
    *,
    by: Administrator,
    tenant_id: str,
    outcome: str,
    reason: str | None,
    dimensions: Mapping[str, AuditDimension],
) -> AuditRecord:
    """The audit record of one administrative action (or its refusal) by ``by``."""
    return AuditRecord(
        event=event,
        tenant_id=tenant_id,
        correlation_id=f"admin:{uuid.uuid4().hex}",
        at=clock.now(),
        outcome=outcome,
        reason=reason,
        dimensions={**dimensions, **by.acting_dimensions(tenant_id)},
    )


async def record_admin_action(
    audit: AuditSink,
    clock: Clock,
    event: AuditEvent,
    *,
    by: Administrator,
    tenant_id: str,
    outcome: str,
    reason: str | None,
    dimensions: Mapping[str, AuditDimension],
) -> None:
    """Record one administrative action (or its refusal) by ``by`` on ``audit``."""
    await audit.record(
        admin_action_record(
            clock,
            event,
            by=by,
            tenant_id=tenant_id,
            outcome=outcome,
            reason=reason,
            dimensions=dimensions,
        )
    )
