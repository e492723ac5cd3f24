"""AuditRecord: one audited fact; the tenant is on every record, denials included."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import attrs

from esra.core.codes import AuditEvent

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
