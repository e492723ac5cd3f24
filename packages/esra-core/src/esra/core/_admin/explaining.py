"""ExplainService: an operator runs an invocation as a named caller and sees its decisions.

Explaining takes ``ESRA_EXPOSURE_MANAGE`` on the tenant: it is the work of whoever tunes an
exposure ("why does this caller find nothing?"). An operator of another tenant holds no
grant on this one and is refused like any caller without the role. The explained caller —
subject, claims, client application — is the operator's to name: the explanation shows what
the pipeline would decide for such a caller, never the data itself (scores, and record keys
only where a caller would see them; no field values; see ``esra.core._explain``).

Every explain is audited as its own event, ``esra.explain``: who explained, the exposure, the
caller explained (subject and client application; claim values are never recorded) and the
explained invocation's correlation id, whose own records carry ``explain: true`` and
``explained_by``. A refusal is recorded as ``denied``; an explain the pipeline refuses or
fails (an exposure it does not serve, a source down) as ``failed``, with the error's code.

The caller named must be one a trusted issuer's token could make
(``esra.core._admin.explained_caller``); any other is refused as ``ESRA_INVALID_REQUEST``
before the search runs, and recorded without the request's text, which is not to be trusted.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping

import attrs

from esra.core._admin.explained_caller import caller_problem
from esra.core._admin.recording import record_admin_action
from esra.core._admin.roles import Administrator, NotPermittedError, Role
from esra.core._audit.record import AuditDimension
from esra.core._context import CallerIdentity, InvocationContext
from esra.core._explain import Explanation
from esra.core._query import PlannedFilter
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent
from esra.core.exceptions import EsraError, ExposureNotFoundError, InvalidRequestError
from esra.core.ports import AuditSink, Clock

__all__ = ["EXPLAIN_ROLE", "ExplainRequest", "ExplainService"]

EXPLAIN_ROLE = Role.ESRA_EXPOSURE_MANAGE
# The explained invocation's correlation ids start so, to tell them from callers' at a glance.
EXPLAIN_CORRELATION_PREFIX = "explain:"


@attrs.frozen
class ExplainRequest:
    """Which invocation to explain: the exposure, the question, and the caller to run as."""

    exposure: str
    request: str
    caller: CallerIdentity
    client_app_id: str
    filters: tuple[PlannedFilter, ...] = ()
    # The platform's runtime authorization (scope level 4) to explain with; None: none.
    authorized_source_ids: frozenset[str] | None = None


class ExplainService:
    """Explains invocations on the tenants it has a retriever for, to operators who may."""

    def __init__(
        self,
        retrievers: Mapping[str, Retriever],
        *,
        audit: AuditSink,
        clock: Clock,
        tenant_claims: Collection[str] = (),
    ) -> None:
        """``tenant_claims``: the claims the host's issuers name a caller's tenant in (each
        issuer's ``tenant_claim``); an explained caller holding one must hold the tenant's id.
        """
        # Kept, not copied: a host adds tenants' retrievers as it composes them.
        self._retrievers = retrievers
        self._audit = audit
        self._clock = clock
        self._tenant_claims = frozenset(tenant_claims)

    async def explain(
        self, admin: Administrator, tenant_id: str, request: ExplainRequest
    ) -> Explanation:
        """Run ``request`` on ``tenant_id`` as its caller, and return what was decided.

        Raises:
            NotPermittedError: ``admin`` lacks ``EXPLAIN_ROLE`` on the tenant (recorded).
            ExposureNotFoundError: the host serves no pipeline for the tenant.
            InvalidRequestError: the question is empty or too long, or too many filters, or
                the caller is one no token could make (``explained_caller``).
        """
        correlation_id = f"{EXPLAIN_CORRELATION_PREFIX}{uuid.uuid4().hex}"
        problem = caller_problem(
            tenant_id=tenant_id,
            exposure=request.exposure,
            caller=request.caller,
            client_app_id=request.client_app_id,
            authorized_source_ids=request.authorized_source_ids,
            tenant_claims=self._tenant_claims,
        )
        dims: dict[str, AuditDimension] = {"subject": admin.subject, "role": EXPLAIN_ROLE.value}
        if problem is None:
            dims |= {
                "exposure": request.exposure,
                "explained_subject": request.caller.subject,
                "explained_client_app": request.client_app_id,
                "explained_correlation_id": correlation_id,
            }
        # The role first: a caller without it never learns what is wrong with its request.
        await self.require(admin, tenant_id, dims)
        if problem is not None:
            await self._record(admin, tenant_id, "failed", InvalidRequestError.code.value, dims)
            raise InvalidRequestError(problem)
        retriever = self._retrievers.get(tenant_id)
        if retriever is None:
            await self._record(admin, tenant_id, "failed", "no_pipeline", dims)
            raise ExposureNotFoundError
        ctx = InvocationContext(
            tenant_id=tenant_id,
            client_app_id=request.client_app_id,
            caller=request.caller,
            exposure_slug=request.exposure,
            correlation_id=correlation_id,
            authorized_source_ids=request.authorized_source_ids,
        )
        try:
            explanation = await retriever.explain(
                ctx, request.request, explained_by=admin.subject, filters=request.filters
            )
        except Exception as exc:
            # Refused or failed, the explain is still an administrative action: audited with
            # a classified reason, never the exception's text (it may be a driver's).
            reason = exc.code.value if isinstance(exc, EsraError) else "unexpected_error"
            await self._record(admin, tenant_id, "failed", reason, dims)
            raise
        dims["status"] = explanation.status
        await self._record(admin, tenant_id, "ok", explanation.error, dims)
        return explanation

    async def require(
        self,
        admin: Administrator,
        tenant_id: str,
        dims: Mapping[str, AuditDimension] | None = None,
    ) -> None:
        """Refuse, and record the refusal, unless ``admin`` may explain on the tenant.

        A host calls it before it reads a request's body, so a caller without the role
        never has its body parsed (nor its problems described).

        Raises:
            NotPermittedError: ``admin`` lacks ``EXPLAIN_ROLE`` on ``tenant_id``.
        """
        if not admin.may(EXPLAIN_ROLE, tenant_id):
            await self._record(
                admin,
                tenant_id,
                "denied",
                "role",
                dims or {"subject": admin.subject, "role": EXPLAIN_ROLE.value},
            )
            raise NotPermittedError

    async def _record(
        self,
        admin: Administrator,
        tenant_id: str,
        outcome: str,
        reason: str | None,
        dims: Mapping[str, AuditDimension],
    ) -> None:
        await record_admin_action(
            self._audit,
            self._clock,
            AuditEvent.EXPLAIN,
            by=admin,
            tenant_id=tenant_id,
            outcome=outcome,
            reason=reason,
            dimensions=dims,
        )
