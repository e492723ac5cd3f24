"""Stage 1 — resolve the effective scope: deterministic, before any model call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from collections.abc import Mapping as MappingABC

import attrs

from esra.core._audit.record import AuditDimension
from esra.core._config.capability import BindingMode, Capability, CapabilityLimits, ResponseMode
from esra.core._config.ceilings import effective_response_modes, narrowed_limits
from esra.core._config.exposure import Exposure
from esra.core._config.mapping import Mapping
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import Source, SourceHealth
from esra.core._context import InvocationContext
from esra.core._pipeline.invocation import Invocation
from esra.core._response import ResponseWarning
from esra.core.codes import AuditEvent, ErrorCode, WarningCode
from esra.core.exceptions import (
    ConfigurationError,
    ExposureNotFoundError,
    NoSourcesAvailableError,
)

__all__ = [
    "EffectiveScope",
    "HealthProbe",
    "ScopedInvocation",
    "ScopedSource",
    "admitted_exposure",
    "resolve_scope",
]

# Asked for the live health of the sources that passed all four levels, and of no other.
HealthProbe = Callable[[Iterable[str]], Awaitable[MappingABC[str, SourceHealth]]]


@attrs.frozen
class ScopedSource:
    """A source the caller may use in this invocation, with its binding mode and mappings."""

    source: Source
    mode: BindingMode
    mappings: tuple[Mapping, ...]
    health: SourceHealth


@attrs.frozen
class EffectiveScope:
    """The intersection of the four levels, after health, with the effective limits.

    ``limits`` and ``response_modes`` are the capability's narrowed by the exposure and its
    access policy (``esra.core._config.ceilings``); every stage reads them from here, never
    from the capability.

    ``warnings`` say which sources the caller is entitled to and would have had searched
    unconditionally were left out because they are unavailable; every response of the
    invocation carries them.
    """

    exposure: Exposure
    capability: Capability
    sources: tuple[ScopedSource, ...]
    limits: CapabilityLimits
    response_modes: frozenset[ResponseMode]
    config_version: str
    warnings: tuple[ResponseWarning, ...] = ()

    def forced(self) -> tuple[ScopedSource, ...]:
        """Mandatory and policy-forced sources: searched unconditionally, never model-chosen."""
        return tuple(s for s in self.sources if s.mode is not BindingMode.OPTIONAL)

    def optional(self) -> tuple[ScopedSource, ...]:
        """Optional sources: the only ones a model may choose among."""
        return tuple(s for s in self.sources if s.mode is BindingMode.OPTIONAL)

    def by_id(self, source_id: str) -> ScopedSource | None:
        """Return the scoped source with ``source_id``, if it is in scope."""
        return next((s for s in self.sources if s.source.id == source_id), None)


@attrs.frozen
class ScopedInvocation(Invocation):
    """An invocation whose scope is resolved: what every stage after the first works in."""

    scope: EffectiveScope

    @classmethod
    def of(cls, invocation: Invocation, scope: EffectiveScope) -> ScopedInvocation:
        """``invocation`` within ``scope``."""
        return cls(ctx=invocation.ctx, clock=invocation.clock, audit=invocation.audit, scope=scope)


async def resolve_scope(
    invocation: Invocation,
    snapshot: ConfigSnapshot,
    *,
    health: MappingABC[str, SourceHealth],
    probe: HealthProbe | None = None,
) -> EffectiveScope:
    """Intersect the four scope levels, apply health, compute the limits, note the result on
    the invocation's audit trail.

    The levels are (1) source policy: lifecycle ``ACTIVE`` and the client application admitted;
    (2) the capability's bindings; (3) the exposure's source subset; (4) the platform's runtime
    authorization. A source reported ``UNAVAILABLE`` (by ``probe``, else by ``health``, else
    by its configured health) or without mappings is dropped. Sources keep their binding order.

    ``probe`` is asked only after the four levels, and only about the sources that passed
    them: a source the caller may not use is never probed on the caller's behalf, so nothing
    its probe logs (a failure naming it) is caused by this caller. A caller the exposure's
    access policy refuses causes no probe at all.

    The effective limits are the capability's, each lowered to the smallest ceiling the
    exposure or its access policy sets; the effective response modes are those all three
    allow.

    A mandatory or policy-forced source dropped for health leaves an
    ``ESRA_SOURCE_UNAVAILABLE`` warning naming it by its business name: it passed all four
    levels, so the caller may know it, and it would have been searched whatever the
    request. An optional source dropped for health leaves none — it is never offered to the
    model, so no selection ever chose it, and a response is not degraded by a source it
    would not have searched.

    The audit record names only effective sources: a source removed at any level never appears
    in it, not even as a count per source.

    Raises:
        ExposureNotFoundError: the snapshot is another tenant's, or the exposure is unknown,
            unpublished, not published to the caller's client application, or its access
            policy does not admit the caller (one error for all, so a caller outside the
            policy learns nothing about the tool).
        ConfigurationError: the capability, exposure and access policy leave no ``results``
            response mode (a snapshot refuses such a published exposure; this fails closed
            should one be served anyway).
        NoSourcesAvailableError: nothing remains after the intersection and health.
    """
    ctx = invocation.ctx
    exposure = admitted_exposure(ctx, snapshot)
    capability = snapshot.capability(exposure.capability_id) if exposure else None
    if exposure is None or capability is None:
        invocation.audit.note(
            AuditEvent.SOURCES_RESOLVE,
            outcome="denied",
            reason=ErrorCode.ESRA_EXPOSURE_NOT_FOUND.value,
        )
        raise ExposureNotFoundError
    # admitted_exposure has just found the policy; it fails closed without one.
    access_policy = snapshot.access_policy(exposure.slug)
    ceilings = (exposure.limits, *([access_policy.limits] if access_policy else []))
    try:
        response_modes = effective_response_modes(
            capability.response_modes,
            (exposure.response_modes, access_policy.response_modes if access_policy else None),
        )
    except ConfigurationError:
        invocation.audit.note(
            AuditEvent.SOURCES_RESOLVE,
            outcome="failed",
            reason=ErrorCode.ESRA_CONFIGURATION_INVALID.value,
            dimensions={"exposure_id": exposure.id, "capability_id": capability.id},
        )
        # The fixed public message: which level took the mode away is the operator's to
        # learn from the configuration, not the caller's.
        raise ConfigurationError from None

    by_id = {s.id: s for s in snapshot.sources}
    # Level 1 runs over every source of the tenant; each later level narrows the previous one,
    # so the audited counts read as a funnel.
    policy = {s.id for s in snapshot.sources if s.admits(ctx.client_app_id)}
    bound = [b for b in capability.bindings if b.source_id in policy]
    subset = [
        b for b in bound if exposure.source_subset is None or b.source_id in exposure.source_subset
    ]
    authorized = [
        b
        for b in subset
        if ctx.authorized_source_ids is None or b.source_id in ctx.authorized_source_ids
    ]
    probed = await probe(tuple(b.source_id for b in authorized)) if probe is not None else {}
    available: list[ScopedSource] = []
    unavailable: list[ResponseWarning] = []
    for binding in authorized:
        source = by_id[binding.source_id]
        state = probed.get(source.id, health.get(source.id, source.health))
        if state is SourceHealth.UNAVAILABLE:
            if binding.mode is not BindingMode.OPTIONAL and snapshot.mappings_of(source.id):
                unavailable.append(_unavailable_warning(source))
            continue
        available.append(
            ScopedSource(
                source=source,
                mode=binding.mode,
                mappings=snapshot.mappings_of(source.id),
                health=state,
            )
        )
    effective = tuple(s for s in available if s.mappings)

    dimensions: dict[str, AuditDimension] = {
        "exposure_id": exposure.id,
        "capability_id": capability.id,
        "config_version": snapshot.version,
        "admitted_source_policy": len(policy),
        "admitted_capability_binding": len(bound),
        "admitted_exposure_subset": len(subset),
        "admitted_runtime_authorization": len(authorized),
        "admitted_health": len(available),
        "effective_count": len(effective),
        "effective_source_ids": tuple(s.source.id for s in effective),
    }
    if not effective:
        invocation.audit.note(
            AuditEvent.SOURCES_RESOLVE,
            outcome="failed",
            reason=ErrorCode.ESRA_NO_SOURCES_AVAILABLE.value,
            dimensions=dimensions,
        )
        raise NoSourcesAvailableError
    invocation.audit.note(
        AuditEvent.SOURCES_RESOLVE,
        dimensions=dimensions,
    )
    return EffectiveScope(
        exposure=exposure,
        capability=capability,
        sources=effective,
        limits=narrowed_limits(capability.limits, ceilings),
        response_modes=response_modes,
        config_version=snapshot.version,
        warnings=tuple(unavailable),
    )


def _unavailable_warning(source: Source) -> ResponseWarning:
    return ResponseWarning(
        WarningCode.ESRA_SOURCE_UNAVAILABLE,
        f"Source '{source.name}' is unavailable and was not searched.",
    )


def admitted_exposure(ctx: InvocationContext, snapshot: ConfigSnapshot) -> Exposure | None:
    """Return the exposure ``ctx`` names if the caller may invoke it, else ``None``.

    Hosts list tools with it and the fetch path re-checks with it, so every entry point
    decides visibility the same way.
    """
    # The tenant check is explicit even though the host should never pass another tenant's
    # snapshot: isolation is enforced at every layer, not assumed from the one above.
    if snapshot.tenant_id != ctx.tenant_id:
        return None
    exposure = snapshot.exposure_by_slug(ctx.exposure_slug)
    if (
        exposure is None
        or exposure.tenant_id != ctx.tenant_id
        or not exposure.published_to(ctx.client_app_id)
    ):
        return None
    # Layer 1: the tool's access policy, evaluated like any tool's. A published exposure
    # always has one (the snapshot refuses otherwise); its absence still fails closed.
    policy = snapshot.access_policy(exposure.slug)
    if policy is None or not policy.admits(ctx.client_app_id, ctx.caller.claims):
        return None
    return exposure
