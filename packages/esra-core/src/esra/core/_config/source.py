"""Source: one searchable enterprise system, described in business terms."""

from __future__ import annotations

from enum import StrEnum

import attrs

__all__ = [
    "DEFAULT_MAX_QUERIES_PER_SOURCE",
    "MAX_QUERIES_PER_SOURCE_CEILING",
    "LifecycleState",
    "Source",
    "SourceHealth",
    "SourcePolicy",
    "clamp_max_queries",
]

DEFAULT_MAX_QUERIES_PER_SOURCE = 3
MAX_QUERIES_PER_SOURCE_CEILING = 20


def clamp_max_queries(value: int) -> int:
    """Clamp an admin-configured ``MaxQueriesPerSource`` into 1..20."""
    return max(1, min(MAX_QUERIES_PER_SOURCE_CEILING, int(value)))


class LifecycleState(StrEnum):
    """Only ``ACTIVE`` sources are ever in scope."""

    DRAFT = "draft"
    ACTIVE = "active"
    DEPRECATED = "deprecated"
    RETIRED = "retired"


class SourceHealth(StrEnum):
    """Reported by the provider; ``UNAVAILABLE`` removes the source from scope."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNAVAILABLE = "unavailable"


@attrs.frozen
class SourcePolicy:
    """The source-level access policy (first of the four scope levels).

    ``allowed_client_apps`` of ``None`` admits every client application of the tenant.
    """

    allowed_client_apps: frozenset[str] | None = None


@attrs.frozen
class Source:
    """A searchable system. Everything a model may see of it is business metadata.

    ``connection_ref`` and ``provider_kind`` are never rendered into a prompt.

    ``answer_permitted`` (off by default, so a source fails closed) lets the source's returned
    results feed a composed answer (authorization layer 6). A source without it still
    contributes results, but its text never reaches the answer model and it is never cited.
    """

    id: str
    tenant_id: str
    name: str
    description: str
    provider_kind: str
    connection_ref: str
    usage_guidance: str = ""
    exclusion_guidance: str = ""
    domain_tags: tuple[str, ...] = ()
    languages: tuple[str, ...] = ("en",)
    example_prompts: tuple[str, ...] = ()
    freshness: str = ""
    priority_weight: float = attrs.field(default=1.0, validator=attrs.validators.ge(0.0))
    lifecycle: LifecycleState = LifecycleState.ACTIVE
    health: SourceHealth = SourceHealth.HEALTHY
    max_queries_per_source: int = attrs.field(
        default=DEFAULT_MAX_QUERIES_PER_SOURCE, converter=clamp_max_queries
    )
    policy: SourcePolicy = SourcePolicy()
    answer_permitted: bool = False

    def admits(self, client_app_id: str) -> bool:
        """Scope level 1, the source policy: ``ACTIVE`` and ``client_app_id`` admitted."""
        allowed = self.policy.allowed_client_apps
        return self.lifecycle is LifecycleState.ACTIVE and (
            allowed is None or client_app_id in allowed
        )
