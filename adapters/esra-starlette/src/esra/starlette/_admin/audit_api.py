"""``GET /audit``: the caller's tenant's audit records, filtered and keyset-paged.

Reading goes through esra-core's ``AuditReview``: it takes ``GOVERNANCE_MANAGE`` or
``SECURITY_MANAGE`` on the token's tenant and records every read, and every refusal, as
``esra.admin.audit.read``. The tenant is always the token's; no parameter names one, so a
token can never read another tenant's records.

Query parameters (each at most once, except ``event``): ``event`` (repeatable, an
``esra.*`` event name), ``subject`` (who acted), ``since`` (inclusive) and ``until``
(exclusive) as ISO-8601 times with an offset, ``correlation_id``, ``limit`` (1–1000,
default 100) and ``cursor`` (the previous page's ``nextCursor``). Anything else is 400.
Without a reader (``admin_app(audit_reader=None)``) the endpoint answers 404
``ESRA_NOT_FOUND``: this host keeps no readable audit log.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from esra.core.admin import NotPermittedError
from esra.core.audit import (
    AUDIT_READ_ROLES,
    DEFAULT_AUDIT_LIMIT,
    AuditCursor,
    AuditQuery,
    AuditQueryError,
    AuditReader,
    AuditRecord,
    AuditReview,
)
from esra.core.ports import AuditSink, Clock
from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._admin.operator import RoleClaims, acting_tenant_of, administrator_of

__all__ = ["AUDIT_READ_ROLES", "AuditApi", "audit_query_of", "audit_record_view"]

_SINGLE = frozenset({"subject", "since", "until", "correlation_id", "limit", "cursor"})
_MAX_PARAM_CHARS = 512


def audit_record_view(record: AuditRecord) -> dict[str, Any]:
    """One record as the API shows it."""
    return {
        "event": record.event.value,
        "tenantId": record.tenant_id,
        "correlationId": record.correlation_id,
        "at": record.at.isoformat(),
        "outcome": record.outcome,
        "reason": record.reason,
        "dimensions": {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in record.dimensions.items()
        },
    }


def _invalid(message: str) -> AdminError:
    return AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, message)


def _time(name: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _invalid(f"{name} is not an ISO-8601 time.") from None
    if moment.tzinfo is None:
        raise _invalid(f"{name} needs a UTC offset (for example 2026-03-01T09:00:00Z).")
    return moment


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_AUDIT_LIMIT
    if not text.isascii() or not text.isdigit() or len(text) > 4:
        raise _invalid("limit is a whole number from 1 to 1000.")
    return int(text)


def audit_query_of(tenant_id: str, params: list[tuple[str, str]]) -> AuditQuery:
    """The query ``params`` describe for ``tenant_id``.

    Raises:
        AdminError: ``ESRA_INVALID_REQUEST`` for an unknown, repeated or malformed parameter.
    """
    single: dict[str, str] = {}
    events: list[str] = []
    for name, value in params:
        if len(value) > _MAX_PARAM_CHARS:
            raise _invalid(f"{name} is too long.")
        if name == "event":
            events.append(value)
        elif name in _SINGLE:
            if name in single:
                raise _invalid(f"{name} may be given once.")
            single[name] = value
        else:
            raise _invalid("Unknown query parameter.")
    try:
        cursor = single.get("cursor")
        return AuditQuery(
            tenant_id=tenant_id,
            events=frozenset(events),
            subject=single.get("subject"),
            since=_time("since", single.get("since")),
            until=_time("until", single.get("until")),
            correlation_id=single.get("correlation_id"),
            limit=_limit(single.get("limit")),
            cursor=AuditCursor.decode(cursor) if cursor is not None else None,
        )
    except AuditQueryError as exc:
        raise _invalid(str(exc) if str(exc) else exc.public_message) from None


class AuditApi:
    """The ``/audit`` endpoint over ``reader`` (None: the host keeps no readable audit);
    reads are recorded on ``audit``."""

    def __init__(
        self,
        reader: AuditReader | None,
        *,
        audit: AuditSink,
        clock: Clock,
        role_claims: RoleClaims,
    ) -> None:
        self._review = AuditReview(reader, audit=audit, clock=clock) if reader is not None else None
        self._role_claims = role_claims

    def routes(self) -> list[Route]:
        """The endpoint, relative to the admin API's base path."""
        return [Route("/audit", self.read, methods=["GET"])]

    async def read(self, request: Request) -> Response:
        """GET /audit: a page of the acting tenant's records (``ESRA-Tenant``), newest first."""
        tenant_id = acting_tenant_of(request)
        administrator = administrator_of(request, self._role_claims)
        forbidden = AdminError(
            AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this action."
        )
        if self._review is None:
            # Nothing can be read, so nothing is recorded; the roles still decide the answer.
            if not any(administrator.may(role, tenant_id) for role in AUDIT_READ_ROLES):
                raise forbidden
            raise AdminError(
                AdminErrorCode.ESRA_NOT_FOUND, "This host keeps no readable audit log."
            )
        query = audit_query_of(tenant_id, list(request.query_params.multi_items()))
        try:
            page = await self._review.read(administrator, query)
        except NotPermittedError:
            raise forbidden from None
        return JSONResponse(
            {
                "records": [audit_record_view(record) for record in page.records],
                "nextCursor": page.next_cursor.encode() if page.next_cursor else None,
            },
            headers={"cache-control": "no-store"},
        )
