"""Small builders for configuration and invocation values, shared by the core tests.

Every builder has defaults that make a valid, consistent object for tenant ``TENANT``; pass
keywords to change what a test cares about (the rest stays valid).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping as MappingABC
from typing import Any

import attrs

from esra.core._context import CallerIdentity, ClaimValue, InvocationContext
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    CapabilityLimits,
    ConfigSnapshot,
    Exposure,
    FieldSpec,
    FieldType,
    Mapping,
    Operator,
    Source,
    SourceBinding,
    SourceHealth,
)

__all__ = [
    "CAPABILITY_ID",
    "CLIENT_APP",
    "EXPOSURE_ID",
    "SLUG",
    "TENANT",
    "make_capability",
    "make_context",
    "make_exposure",
    "make_field",
    "make_mapping",
    "make_scope",
    "make_scoped",
    "make_snapshot",
    "make_source",
]

TENANT = "tenant-a"
CLIENT_APP = "app-1"
SLUG = "hr_search"
CAPABILITY_ID = "cap-1"
EXPOSURE_ID = "exp-1"


def make_field(
    name: str,
    *,
    column: str | None = None,
    type: FieldType = FieldType.TEXT,
    searchable: bool = True,
    filterable: bool = False,
    returnable: bool = True,
    restricted: bool = False,
    operators: Iterable[Operator] = (),
    description: str = "",
) -> FieldSpec:
    """Build a field; the physical column defaults to ``col_{name}``."""
    return FieldSpec(
        name=name,
        column=column or f"col_{name}",
        type=type,
        is_searchable=searchable,
        is_filterable=filterable,
        is_returnable=returnable,
        is_restricted=restricted,
        allowed_operators=frozenset(operators),
        description=description,
    )


def make_mapping(
    mapping_id: str = "m-1",
    *,
    source_id: str = "s-1",
    tenant_id: str = TENANT,
    fields: Iterable[FieldSpec] | None = None,
    **overrides: Any,
) -> Mapping:
    """Build a mapping with a ``title`` and a ``body`` field unless ``fields`` is given."""
    mapping = Mapping(
        id=mapping_id,
        tenant_id=tenant_id,
        source_id=source_id,
        business_name=f"Records of {mapping_id}",
        description=f"Searchable records of {mapping_id}.",
        relation=f"tbl_{mapping_id.replace('-', '_')}",
        record_key="col_id",
        title_field="title",
        content_fields=("body",),
        fields=tuple(fields) if fields is not None else (make_field("title"), make_field("body")),
    )
    return attrs.evolve(mapping, **overrides) if overrides else mapping


def make_source(source_id: str = "s-1", *, tenant_id: str = TENANT, **overrides: Any) -> Source:
    """Build an active, healthy source named ``Source {source_id}``."""
    source = Source(
        id=source_id,
        tenant_id=tenant_id,
        name=f"Source {source_id}",
        description=f"Business records held in {source_id}.",
        provider_kind="in_memory",
        connection_ref=f"secret://{source_id}",
    )
    return attrs.evolve(source, **overrides) if overrides else source


def make_capability(
    bindings: Iterable[SourceBinding | str],
    *,
    capability_id: str = CAPABILITY_ID,
    tenant_id: str = TENANT,
    **overrides: Any,
) -> Capability:
    """Build a capability; a plain source id binds that source as OPTIONAL."""
    capability = Capability(
        id=capability_id,
        tenant_id=tenant_id,
        name=f"Capability {capability_id}",
        bindings=tuple(b if isinstance(b, SourceBinding) else SourceBinding(b) for b in bindings),
    )
    return attrs.evolve(capability, **overrides) if overrides else capability


def make_exposure(
    *,
    exposure_id: str = EXPOSURE_ID,
    tenant_id: str = TENANT,
    slug: str = SLUG,
    capability_id: str = CAPABILITY_ID,
    audience: Iterable[str] = (CLIENT_APP,),
    published: bool = True,
    **overrides: Any,
) -> Exposure:
    """Build a published exposure whose audience is ``CLIENT_APP``."""
    return Exposure(
        id=exposure_id,
        tenant_id=tenant_id,
        slug=slug,
        capability_id=capability_id,
        audience=frozenset(audience),
        published=published,
        **overrides,
    )


def make_snapshot(
    sources: Iterable[Source],
    *,
    tenant_id: str = TENANT,
    version: str = "v1",
    mappings: Iterable[Mapping] | None = None,
    capability: Capability | None = None,
    exposure: Exposure | None = None,
    access_policy: AccessPolicy | None = None,
) -> ConfigSnapshot:
    """Build a consistent snapshot.

    Defaults: one mapping ``m-{source id}`` per source, a capability binding every source as
    OPTIONAL, a published exposure of it to ``CLIENT_APP``, and the access policy admitting
    exactly that audience.
    """
    source_list = tuple(sources)
    if mappings is None:
        mappings = [
            make_mapping(f"m-{s.id}", source_id=s.id, tenant_id=tenant_id) for s in source_list
        ]
    if capability is None:
        capability = make_capability([s.id for s in source_list], tenant_id=tenant_id)
    if exposure is None:
        exposure = make_exposure(tenant_id=tenant_id, capability_id=capability.id)
    return ConfigSnapshot(
        tenant_id=tenant_id,
        version=version,
        sources=source_list,
        mappings=tuple(mappings),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(access_policy or AccessPolicy.matching(exposure),),
    )


def make_context(
    *,
    tenant_id: str = TENANT,
    client_app_id: str = CLIENT_APP,
    slug: str = SLUG,
    claims: MappingABC[str, ClaimValue] | None = None,
    authorized_source_ids: Iterable[str] | None = None,
    correlation_id: str = "corr-1",
    subject: str = "user-1",
) -> InvocationContext:
    """Build an invocation context for ``CLIENT_APP`` calling exposure ``SLUG``."""
    return InvocationContext(
        tenant_id=tenant_id,
        client_app_id=client_app_id,
        caller=CallerIdentity(subject=subject, claims=dict(claims or {})),
        exposure_slug=slug,
        correlation_id=correlation_id,
        authorized_source_ids=(
            frozenset(authorized_source_ids) if authorized_source_ids is not None else None
        ),
    )


def make_scoped(
    source: Source,
    *,
    mode: BindingMode = BindingMode.OPTIONAL,
    mappings: Iterable[Mapping] | None = None,
    health: SourceHealth = SourceHealth.HEALTHY,
) -> ScopedSource:
    """Build a scoped source; by default with one mapping ``m-{source id}``."""
    if mappings is None:
        mappings = [make_mapping(f"m-{source.id}", source_id=source.id, tenant_id=source.tenant_id)]
    return ScopedSource(source=source, mode=mode, mappings=tuple(mappings), health=health)


def make_scope(
    scoped: Iterable[ScopedSource],
    *,
    tenant_id: str = TENANT,
    exposure: Exposure | None = None,
    capability: Capability | None = None,
    limits: CapabilityLimits | None = None,
    config_version: str = "v1",
) -> EffectiveScope:
    """Build an effective scope directly (without resolution) over ``scoped`` sources."""
    scoped_list = tuple(scoped)
    if capability is None:
        capability = make_capability(
            [SourceBinding(s.source.id, s.mode) for s in scoped_list], tenant_id=tenant_id
        )
    if limits is not None:
        capability = attrs.evolve(capability, limits=limits)
    if exposure is None:
        exposure = make_exposure(tenant_id=tenant_id, capability_id=capability.id)
    return EffectiveScope(
        exposure=exposure,
        capability=capability,
        sources=scoped_list,
        limits=capability.limits,
        response_modes=capability.response_modes,
        config_version=config_version,
    )
