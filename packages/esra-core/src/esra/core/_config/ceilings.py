"""Ceilings: how an exposure and its access policy narrow the capability's limits and modes.

A capability states the most its invocations may do. The exposure publishing it (authored
under ``ESRA_EXPOSURE_MANAGE``) and the access policy governing that tool (authored under
``GOVERNANCE_MANAGE``) may each only take away from it, never add: the effective value of a
limit is the smallest any level sets, and the effective response modes are the ones every
level allows. Scope resolution computes both for each invocation, and a snapshot refuses a
published exposure whose levels leave nothing it could serve.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from esra.core._config.capability import CapabilityLimits, ResponseMode
from esra.core.exceptions import ConfigurationError

__all__ = ["LimitCeilings", "effective_response_modes", "narrowed_limits"]

_COUNT = attrs.validators.optional(attrs.validators.ge(1))
_SECONDS = attrs.validators.optional(attrs.validators.gt(0.0))


@attrs.frozen
class LimitCeilings:
    """Upper bounds on a capability's ``CapabilityLimits``; ``None`` leaves a limit as it is.

    Every limit of ``CapabilityLimits`` has a ceiling of the same name, and for each of them
    a smaller value is the stricter one (fewer rows, queries, candidates, retries or
    concurrent calls; a shorter timeout or cache lifetime), so a ceiling can only narrow.
    """

    max_rows_per_query: int | None = attrs.field(default=None, validator=_COUNT)
    max_total_queries: int | None = attrs.field(default=None, validator=_COUNT)
    max_rerank_candidates: int | None = attrs.field(default=None, validator=_COUNT)
    invocation_timeout_s: float | None = attrs.field(default=None, validator=_SECONDS)
    attempt_timeout_s: float | None = attrs.field(default=None, validator=_SECONDS)
    retry_attempts: int | None = attrs.field(default=None, validator=_COUNT)
    invocation_concurrency: int | None = attrs.field(default=None, validator=_COUNT)
    source_concurrency: int | None = attrs.field(default=None, validator=_COUNT)
    max_terms_per_query: int | None = attrs.field(default=None, validator=_COUNT)
    max_term_chars: int | None = attrs.field(default=None, validator=_COUNT)
    # 0 turns the result cache off, which is the strictest lifetime there is.
    result_cache_ttl_s: float | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(0.0))
    )


def narrowed_limits(
    limits: CapabilityLimits, ceilings: Iterable[LimitCeilings]
) -> CapabilityLimits:
    """``limits`` with each value lowered to the smallest ceiling any of ``ceilings`` sets."""
    levels = tuple(ceilings)
    changes: dict[str, Any] = {}
    for field in attrs.fields(LimitCeilings):
        capped = [v for level in levels if (v := getattr(level, field.name)) is not None]
        if capped:
            changes[field.name] = min(getattr(limits, field.name), *capped)
    return attrs.evolve(limits, **changes)


def effective_response_modes(
    capability_modes: frozenset[ResponseMode],
    allowed: Iterable[frozenset[ResponseMode] | None],
) -> frozenset[ResponseMode]:
    """The response modes the capability offers and every level in ``allowed`` permits.

    A level of ``None`` sets no restriction of its own. Every response carries results and
    an answer only ever cites them, so a set without ``results`` cannot be served without
    returning something a level forbids: it fails closed instead.

    Raises:
        ConfigurationError: the levels leave no ``results`` mode (their intersection is
            empty, or holds ``answer`` alone).
    """
    modes = capability_modes
    for level in allowed:
        if level is not None:
            modes &= level
    if ResponseMode.RESULTS not in modes:
        msg = "the capability, exposure and access policy allow no results response mode"
        raise ConfigurationError(msg)
    return modes
