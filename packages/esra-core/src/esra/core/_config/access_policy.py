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
    ``required_claims`` must be held by the caller: present with a value — not null, not an
    empty or blank string, not an empty list nor one holding such a string, which identity
    providers send for an unset attribute or no groups. The value is not judged further
    (``false`` and ``0`` are values). ``response_modes`` and ``limits``
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
        return self.admits_client_app(client_app) and all(
            _holds(claims.get(name)) for name in self.required_claims
        )

    def admits_client_app(self, client_app: str) -> bool:
        """Whether some caller from ``client_app`` may invoke the tool, claims aside."""
        return self.allowed_client_apps is None or client_app in self.allowed_client_apps


def _holds(value: object) -> bool:
    """Whether a claim carries a value (``AccessPolicy``: what holding a claim means)."""
    if isinstance(value, tuple | list | frozenset | set):
        return bool(value) and all(_holds(item) for item in value)
    if isinstance(value, str):
        return bool(value.strip())
    return value is not None
