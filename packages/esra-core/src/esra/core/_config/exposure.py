"""Exposure: a capability published to an audience as the MCP tool ``esra_{slug}``."""

from __future__ import annotations

import re
from enum import StrEnum

import attrs

from esra.core._config.capability import ResponseMode
from esra.core._config.ceilings import LimitCeilings

__all__ = ["Exposure", "RetentionClass"]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_]{0,40}$")


def _check_slug(_instance: object, _attribute: object, value: str) -> None:
    if not _SLUG.fullmatch(value):
        msg = "an exposure slug is 1-41 lowercase letters, digits or underscores"
        raise ValueError(msg)


class RetentionClass(StrEnum):
    """Whether derivatives of the caller's prompt (cache keys, cached selections) may be kept."""

    STANDARD = "standard"
    NO_PROMPT_DERIVATIVES = "no_prompt_derivatives"


@attrs.frozen
class Exposure:
    """Publishes a capability to an audience of client applications.

    ``source_subset`` of ``None`` exposes every source the capability binds.

    ``response_modes`` and ``limits`` narrow the capability's for this audience: ``None`` and
    unset ceilings keep the capability's own, and nothing here can widen them (see
    ``esra.core._config.ceilings``).
    """

    id: str
    tenant_id: str
    slug: str = attrs.field(validator=_check_slug)
    capability_id: str = ""
    audience: frozenset[str] = frozenset()
    source_subset: frozenset[str] | None = None
    published: bool = False
    fetch_enabled: bool = False
    top_k: int = attrs.field(default=10, validator=attrs.validators.in_(range(1, 101)))
    # A response of no characters answers nothing: at least one, for both.
    size_cap_chars: int = attrs.field(default=20_000, validator=attrs.validators.ge(1))
    fragment_chars: int = attrs.field(default=400, validator=attrs.validators.ge(1))
    retention: RetentionClass = RetentionClass.STANDARD
    response_modes: frozenset[ResponseMode] | None = None
    limits: LimitCeilings = attrs.field(factory=LimitCeilings)

    def published_to(self, client_app_id: str) -> bool:
        """Whether the exposure is published and ``client_app_id`` is in its audience."""
        return self.published and client_app_id in self.audience

    @property
    def tool_name(self) -> str:
        """The MCP tool name this exposure publishes."""
        return f"esra_{self.slug}"

    @property
    def fetch_tool_name(self) -> str:
        """The name of the fetch tool, published only when ``fetch_enabled``."""
        return f"{self.tool_name}_fetch"
