"""Stage 1 — resolve the effective scope: deterministic, before any model call."""

from __future__ import annotations

import attrs

from esra.core.config.capability import BindingMode, Capability, CapabilityLimits, ResponseMode
from esra.core.config.exposure import Exposure
from esra.core.config.mapping import Mapping
from esra.core.config.source import Source, SourceHealth

__all__ = ["EffectiveScope", "ScopedSource"]


@attrs.frozen
class ScopedSource:
    """A source the caller may use in this invocation, with its binding mode and mappings."""

    source: Source
    mode: BindingMode
    mappings: tuple[Mapping, ...]
    health: SourceHealth


@attrs.frozen
class EffectiveScope:
    """The intersection of the four levels, after health, with the effective limits."""

    exposure: Exposure
    capability: Capability
    sources: tuple[ScopedSource, ...]
    limits: CapabilityLimits
    response_modes: frozenset[ResponseMode]
    config_version: str

    def forced(self) -> tuple[ScopedSource, ...]:
        """Mandatory and policy-forced sources: searched unconditionally, never model-chosen."""
        return tuple(s for s in self.sources if s.mode is not BindingMode.OPTIONAL)

    def optional(self) -> tuple[ScopedSource, ...]:
        """Optional sources: the only ones a model may choose among."""
        return tuple(s for s in self.sources if s.mode is BindingMode.OPTIONAL)

    def by_id(self, source_id: str) -> ScopedSource | None:
        """Return the scoped source with ``source_id``, if it is in scope."""
        return next((s for s in self.sources if s.source.id == source_id), None)
