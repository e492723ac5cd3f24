"""AuditReview: reading a tenant's audit back, role-checked and itself audited.

Reading audit is an oversight duty, so it takes a platform role: ``GOVERNANCE_MANAGE`` or
``SECURITY_MANAGE`` on the tenant. The ESRA & Data roles do not grant it — a data or
exposure manager reading the record of every other link in the triple-control chain would
widen their authority.

Every read leaves a record (event ``esra.admin.audit.read``): who read, with which filters
and how many records came back; a refused read is recorded as ``denied`` like any other
administrative action. The record of a read is written after the page is read, so a read
never returns its own record; the next one does.
"""

from __future__ import annotations

from esra.core._admin.recording import record_admin_action
from esra.core._admin.roles import Administrator, NotPermittedError, Role
from esra.core._audit.query import AuditPage, AuditQuery, AuditReader
from esra.core._audit.record import AuditDimension
from esra.core.codes import AuditEvent
from esra.core.ports import AuditSink, Clock

__all__ = ["AUDIT_READ_ROLES", "AuditReview"]

AUDIT_READ_ROLES = (Role.GOVERNANCE_MANAGE, Role.SECURITY_MANAGE)


def _filters(query: AuditQuery) -> dict[str, AuditDimension]:
    """The query's filters as audit dimensions; the acted-on ``subject`` dimension is the
    reader's, so the caller filter is recorded as ``caller_filter``."""
    return {
        "events": tuple(sorted(event.value for event in query.events)),
        "caller_filter": query.subject,
        "since": query.since.isoformat() if query.since is not None else None,
        "until": query.until.isoformat() if query.until is not None else None,
        "correlation_filter": query.correlation_id,
        "limit": query.limit,
        "paged": query.cursor is not None,
    }


class AuditReview:
    """Reads one tenant's audit through ``reader`` for an administrator who may, and
    records every read (and every refusal) on ``audit``."""

    def __init__(self, reader: AuditReader, *, audit: AuditSink, clock: Clock) -> None:
        self._reader = reader
        self._audit = audit
        self._clock = clock

    async def read(self, admin: Administrator, query: AuditQuery) -> AuditPage:
        """The page ``query`` selects of ``query.tenant_id``'s records.

        Raises:
            NotPermittedError: ``admin`` holds neither audit-reading role on the tenant (the
                refusal is recorded).
        """
        tenant_id = query.tenant_id
        dims: dict[str, AuditDimension] = {"subject": admin.subject, **_filters(query)}
        if not any(admin.may(role, tenant_id) for role in AUDIT_READ_ROLES):
            await record_admin_action(
                self._audit,
                self._clock,
                AuditEvent.ADMIN_AUDIT_READ,
                by=admin,
                tenant_id=tenant_id,
                outcome="denied",
                reason="role",
                dimensions=dims,
            )
            raise NotPermittedError
        page = await self._reader.query(query)
        dims["records"] = len(page.records)
        await record_admin_action(
            self._audit,
            self._clock,
            AuditEvent.ADMIN_AUDIT_READ,
            by=admin,
            tenant_id=tenant_id,
            outcome="ok",
            reason=None,
            dimensions=dims,
        )
        return page
