"""InvocationContext: who is calling, for which tenant and exposure — built by the host only."""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

__all__ = ["CallerIdentity", "ClaimValue", "InvocationContext"]

ClaimValue = str | int | bool | tuple[str, ...]


@attrs.frozen
class CallerIdentity:
    """The authenticated caller. Claim values are never sent to a model or logged.

    ``issuer`` is the identity provider that vouched for ``subject`` ("" when the host has
    none to name, e.g. a caller described for an explanation). OpenID Connect makes a
    subject unique only within its issuer: two trusted issuers' "alice" are two callers.
    """

    subject: str
    claims: Mapping[str, ClaimValue] = attrs.field(factory=dict, repr=False)
    issuer: str = ""

    @property
    def key(self) -> str:
        """This caller among all callers of its tenant: the issuer and the subject together,
        unambiguously (no subject or issuer can spell another pair's key). What is kept per
        caller — a fetch budget, a reference's binding — is kept under it, so one issuer's
        subject can neither spend nor open what another issuer's same-named subject holds."""
        return json.dumps([self.issuer, self.subject], ensure_ascii=False, separators=(",", ":"))


@attrs.frozen
class InvocationContext:
    """Everything the pipeline knows about one invocation.

    The host builds it from the authenticated request; the tenant comes from there and
    nowhere else, so the core has no way to act for another tenant. ``authorized_source_ids``
    is the platform's runtime authorization (the fourth scope level): ``None`` means the
    platform authorized the tool and imposes no narrower source restriction.
    """

    tenant_id: str
    client_app_id: str
    caller: CallerIdentity
    exposure_slug: str
    correlation_id: str
    authorized_source_ids: frozenset[str] | None = None
