"""AccessPolicy: who may invoke an exposure's tool, authored under ``GOVERNANCE_MANAGE``."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

__all__ = ["AccessPolicy"]


@attrs.frozen
class AccessPolicy:
    """The access policy of the tool ``esra_{slug}`` over ``capability_id``.

    ``allowed_client_apps`` of ``None`` admits every client application of the tenant;
    otherwise an exposure's audience must lie within it. Every claim in
    ``required_claims`` must be present on the caller.
    """

    tenant_id: str
    slug: str
    capability_id: str
    allowed_client_apps: frozenset[str] | None = None
    required_claims: frozenset[str] = frozenset()

    def admits(self, client_app: str, claims: Mapping[str, object]) -> bool:
        """Whether a caller from ``client_app`` holding ``claims`` may invoke the tool."""
        if self.allowed_client_apps is not None and client_app not in self.allowed_client_apps:
            return False
        return self.required_claims <= claims.keys()
