"""AccessPolicy: who may invoke an exposure's tool, authored under ``GOVERNANCE_MANAGE``.

It is the first of the seven authorization layers and is evaluated like any tool's policy: a
caller it does not admit sees no trace that the tool exists. It lives in the configuration
snapshot beside the exposure it governs, so the runtime evaluates exactly what was published.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from esra.core._config.capability import ResponseMode
from esra.core._config.ceilings import LimitCeilings
from esra.core._config.exposure import Exposure

__all__ = ["AccessPolicy"]


@attrs.frozen
class AccessPolicy:
    """The access policy of the tool ``esra_{slug}`` over ``capability_id``.

    ``allowed_client_apps`` of ``None`` admits every client application of the tenant;
    otherwise an exposure's audience must lie within it. Every claim in
    ``required_claims`` must be present on the caller. ``response_modes`` and ``limits``
    narrow the capability's for every caller of the tool, as the exposure's do: governance
    can take an answer mode away or tighten a bound, never add one (see
    ``esra.core._config.ceilings``).
    """

    tenant_id: str
    slug: str
    capability_id: str
    allowed_client_apps: frozenset[str] | None = None
    required_claims: frozenset[str] = frozenset()
    response_modes: frozenset[ResponseMode] | None = None
    limits: LimitCeilings = attrs.field(factory=LimitCeilings)

    @classmethod
    def matching(
        cls, exposure: Exposure, *, required_claims: frozenset[str] = frozenset()
    ) -> AccessPolicy:
        """The policy admitting exactly ``exposure``'s audience, holding ``required_claims``.

        For embedders who configure in code: the policy is still a separate, explicit object,
        so a governance review can tighten it without touching the exposure.
        """
        return cls(
            tenant_id=exposure.tenant_id,
            slug=exposure.slug,
            capability_id=exposure.capability_id,
            allowed_client_apps=exposure.audience,
            required_claims=required_claims,
        )

    def admits(self, client_app: str, claims: Mapping[str, object]) -> bool:
        """Whether a caller from ``client_app`` holding ``claims`` may invoke the tool."""
        return self.admits_client_app(client_app) and self.required_claims <= claims.keys()

    def admits_client_app(self, client_app: str) -> bool:
        """Whether some caller from ``client_app`` may invoke the tool, claims aside."""
        return self.allowed_client_apps is None or client_app in self.allowed_client_apps
