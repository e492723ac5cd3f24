"""ConfigSnapshot: one tenant's whole, versioned, internally consistent configuration."""

from __future__ import annotations

from typing import NoReturn

import attrs

from esra.core._config.access_policy import AccessPolicy
from esra.core._config.capability import Capability
from esra.core._config.ceilings import effective_response_modes
from esra.core._config.exposure import Exposure
from esra.core._config.mapping import Mapping
from esra.core._config.record_filter_template import (
    RESERVED_CLAIMS,
    is_undefined_reserved_claim,
    parse_record_filter_template,
)
from esra.core._config.source import Source
from esra.core.exceptions import ConfigurationError

__all__ = ["ConfigSnapshot"]


@attrs.frozen
class ConfigSnapshot:
    """A tenant's sources, mappings, capabilities and exposures at one version.

    Construction checks every cross-reference, so a snapshot that exists is consistent:
    nothing references another tenant's object, names are unique within the tenant, every
    field a mapping names exists on it, and every published exposure has an access policy
    that agrees with it (a published tool without one would have nothing to evaluate).
    """

    tenant_id: str
    version: str
    sources: tuple[Source, ...] = ()
    mappings: tuple[Mapping, ...] = ()
    capabilities: tuple[Capability, ...] = ()
    exposures: tuple[Exposure, ...] = ()
    access_policies: tuple[AccessPolicy, ...] = ()

    def __attrs_post_init__(self) -> None:
        _check(self)

    def source(self, source_id: str) -> Source | None:
        """Return the source with ``source_id``."""
        return next((s for s in self.sources if s.id == source_id), None)

    def capability(self, capability_id: str) -> Capability | None:
        """Return the capability with ``capability_id``."""
        return next((c for c in self.capabilities if c.id == capability_id), None)

    def exposure_by_slug(self, slug: str) -> Exposure | None:
        """Return the exposure published under ``slug``."""
        return next((e for e in self.exposures if e.slug == slug), None)

    def access_policy(self, slug: str) -> AccessPolicy | None:
        """Return the access policy of the tool ``esra_{slug}``."""
        return next((p for p in self.access_policies if p.slug == slug), None)

    def mappings_of(self, source_id: str) -> tuple[Mapping, ...]:
        """Return the mappings belonging to ``source_id``, in configuration order."""
        return tuple(m for m in self.mappings if m.source_id == source_id)


def _fail(message: str) -> NoReturn:
    raise ConfigurationError(message)


def _check_unique(kind: str, values: list[str]) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            _fail(f"duplicate {kind} {value!r}")
        seen.add(value)


def _check(snapshot: ConfigSnapshot) -> None:
    objects: list[Source | Mapping | Capability | Exposure] = [
        *snapshot.sources,
        *snapshot.mappings,
        *snapshot.capabilities,
        *snapshot.exposures,
    ]
    for obj in objects:
        if obj.tenant_id != snapshot.tenant_id:
            _fail(f"{type(obj).__name__} {obj.id!r} belongs to another tenant")
    _check_unique("source id", [s.id for s in snapshot.sources])
    _check_unique("source name", [s.name for s in snapshot.sources])
    _check_unique("mapping id", [m.id for m in snapshot.mappings])
    _check_unique("capability id", [c.id for c in snapshot.capabilities])
    _check_unique("capability name", [c.name for c in snapshot.capabilities])
    _check_unique("exposure id", [e.id for e in snapshot.exposures])
    _check_unique("exposure slug", [e.slug for e in snapshot.exposures])
    # Slug "a_fetch" would publish the tool "esra_a_fetch", which is also exposure "a"'s fetch
    # tool: tool names, not only slugs, must be unique.
    _check_unique(
        "tool name",
        [
            name
            for e in snapshot.exposures
            for name in (e.tool_name, *([e.fetch_tool_name] if e.fetch_enabled else []))
        ],
    )
    source_ids = {s.id for s in snapshot.sources}
    for mapping in snapshot.mappings:
        if mapping.source_id not in source_ids:
            _fail(f"mapping {mapping.id!r} references an unknown source")
        _check_mapping_fields(mapping)
    for capability in snapshot.capabilities:
        _check_unique(
            f"binding in capability {capability.id!r}",
            [b.source_id for b in capability.bindings],
        )
        for binding in capability.bindings:
            if binding.source_id not in source_ids:
                _fail(f"capability {capability.id!r} binds an unknown source")
    capability_ids = {c.id for c in snapshot.capabilities}
    for exposure in snapshot.exposures:
        if exposure.capability_id not in capability_ids:
            _fail(f"exposure {exposure.id!r} references an unknown capability")
        if exposure.source_subset is not None and not exposure.source_subset <= source_ids:
            _fail(f"exposure {exposure.id!r} names an unknown source")
    _check_policies(snapshot, capability_ids)


def _check_policies(snapshot: ConfigSnapshot, capability_ids: set[str]) -> None:
    for authored in snapshot.access_policies:
        if authored.tenant_id != snapshot.tenant_id:
            _fail(f"access policy {authored.slug!r} belongs to another tenant")
        if authored.capability_id not in capability_ids:
            _fail(f"access policy {authored.slug!r} names an unknown capability")
    _check_unique("access policy slug", [p.slug for p in snapshot.access_policies])
    for exposure in snapshot.exposures:
        if not exposure.published:
            continue
        policy = snapshot.access_policy(exposure.slug)
        if policy is None:
            _fail(f"published exposure {exposure.slug!r} has no access policy")
        if policy.capability_id != exposure.capability_id:
            _fail(f"exposure {exposure.slug!r} and its access policy name different capabilities")
        allowed = policy.allowed_client_apps
        if allowed is not None and not exposure.audience <= allowed:
            _fail(f"exposure {exposure.slug!r} reaches beyond its access policy's client apps")
        capability = snapshot.capability(exposure.capability_id)
        if capability is not None:
            # Refused at publication rather than at each call: a tool whose levels leave it
            # nothing to serve would otherwise be listed and then fail every invocation.
            try:
                effective_response_modes(
                    capability.response_modes, (exposure.response_modes, policy.response_modes)
                )
            except ConfigurationError:
                _fail(
                    f"exposure {exposure.slug!r}: its capability, its own response modes and "
                    "its access policy's allow no results mode in common"
                )


def _check_mapping_fields(mapping: Mapping) -> None:
    _check_unique(f"field in mapping {mapping.id!r}", [f.name for f in mapping.fields])
    named = [
        mapping.title_field,
        *mapping.content_fields,
        *(rule.field for rule in mapping.masking),
        *(rule.field for rule in mapping.record_filters),
        *mapping.default_template.fields,
    ]
    if mapping.freshness_field is not None:
        named.append(mapping.freshness_field)
    for name in named:
        if mapping.field(name) is None:
            _fail(f"mapping {mapping.id!r} names an unknown field {name!r}")
    for rule in mapping.record_filters:
        # As in a template: a filter may bind no claim a caller could pass off as the core's.
        if is_undefined_reserved_claim(rule.claim):
            allowed = ", ".join(sorted(RESERVED_CLAIMS))
            _fail(
                f"mapping {mapping.id!r}: a record filter names the reserved claim "
                f"{rule.claim!r} (only {allowed} is defined)"
            )
    if not mapping.content_fields:
        _fail(f"mapping {mapping.id!r} has no content fields")
    # Title and fragments are returned to every caller, so they must be allowlisted fields.
    for name in (mapping.title_field, *mapping.content_fields):
        spec = mapping.field(name)
        if spec is not None and (not spec.is_returnable or spec.is_restricted):
            _fail(f"mapping {mapping.id!r}: title and content fields must be returnable")
    if mapping.record_filter_template is not None:
        # Parsed, not just scanned: every field must exist and every literal fit its type.
        parse_record_filter_template(mapping.record_filter_template, mapping)
