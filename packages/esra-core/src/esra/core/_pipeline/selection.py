"""Stage 2 — select sources: forced ones always, optional ones as the model chooses."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import attrs

from esra.core._config.capability import BindingMode, Capability
from esra.core._config.exposure import RetentionClass
from esra.core._config.source import Source
from esra.core._context import InvocationContext
from esra.core._pipeline.cache_keys import (
    SELECTION_TTL_S,
    configuration_fingerprint,
    selection_cache_key,
)
from esra.core._pipeline.scope import EffectiveScope, ScopedInvocation, ScopedSource
from esra.core._prompts.builders import build_selection_prompt
from esra.core._prompts.contracts import parse_selection
from esra.core._prompts.model import datamark_for
from esra.core._response import ResponseWarning
from esra.core.codes import AuditEvent, WarningCode
from esra.core.ports import Cache, LanguageModel

__all__ = ["Selection", "select_sources", "selection_configuration"]

_log = logging.getLogger(__name__)

_FALLBACK_MESSAGE = (
    "Source selection was unavailable; only the sources this tool always searches were used."
)


@attrs.frozen
class Selection:
    """The sources to plan for, in scope order, and any warnings selection raised."""

    sources: tuple[ScopedSource, ...]
    warnings: tuple[ResponseWarning, ...] = ()


@attrs.frozen
class _Choice:
    """What the optional-source choice produced, for the selection and its audit record."""

    chosen: frozenset[str]
    cache_state: str
    unknown: int = 0
    fallback: bool = False


async def select_sources(
    invocation: ScopedInvocation,
    request: str,
    *,
    model: LanguageModel,
    cache: Cache | None,
) -> Selection:
    """Choose the sources to search: every forced source, plus the optional ones the model picks.

    Only optional sources' business metadata reaches the model; mandatory and policy-forced
    sources are included without being shown, and with no optional source the model is not
    called. The model's answer is checked against the candidates it was given: any other id is
    dropped and audited, so the model cannot widen its own reach. A failing model or unreadable
    answer degrades to the forced sources with ``ESRA_SELECTION_FALLBACK``. A valid choice is
    cached for the tenant unless the exposure's retention class forbids prompt derivatives,
    under a key that covers what the prompt is built from (``selection_configuration``).
    """
    scope = invocation.scope
    if scope.optional():
        choice = await _choose(invocation, request, model=model, cache=cache)
    else:
        choice = _Choice(chosen=frozenset(), cache_state="unused")
    selected = tuple(
        s
        for s in scope.sources
        if s.mode is not BindingMode.OPTIONAL or s.source.id in choice.chosen
    )
    warnings = (
        (ResponseWarning(WarningCode.ESRA_SELECTION_FALLBACK, _FALLBACK_MESSAGE),)
        if choice.fallback
        else ()
    )
    invocation.audit.note(
        AuditEvent.SOURCES_SELECT,
        outcome="fallback" if choice.fallback else "ok",
        reason=WarningCode.ESRA_SELECTION_FALLBACK.value if choice.fallback else None,
        dimensions={
            "forced_count": len(scope.forced()),
            "candidate_count": len(scope.optional()),
            "chosen_count": len(choice.chosen),
            "unknown_rejected_count": choice.unknown,
            "cache": choice.cache_state,
            "selected_source_ids": tuple(s.source.id for s in selected),
        },
    )
    return Selection(sources=selected, warnings=warnings)


async def _choose(
    invocation: ScopedInvocation,
    request: str,
    *,
    model: LanguageModel,
    cache: Cache | None,
) -> _Choice:
    ctx, scope = invocation.ctx, invocation.scope
    optional = scope.optional()
    candidates = frozenset(s.source.id for s in optional)
    key: str | None = None
    cache_state = "unused"
    if cache is not None:
        if scope.exposure.retention is RetentionClass.NO_PROMPT_DERIVATIVES:
            cache = None
            cache_state = "disabled"
        else:
            key = selection_cache_key(
                tenant_id=ctx.tenant_id,
                exposure_id=scope.exposure.id,
                config_version=scope.config_version,
                candidate_ids=candidates,
                # The version string may be another configuration's too: a choice made over
                # other descriptions or another prompt profile is not this one's.
                configuration=selection_configuration(
                    [s.source for s in optional], scope.capability
                ),
                request=request,
            )
            cached = await _cache_get(cache, key, ctx)
            if cached is not None:
                # Re-checked even though the key covers the candidate set: the cache is storage
                # outside the core, and nothing outside the candidates may ever be selected.
                return _Choice(chosen=candidates & set(cached), cache_state="hit")
            cache_state = "miss"

    answer = await _ask_model(ctx, scope, request, model)
    if answer is None:
        return _Choice(chosen=frozenset(), cache_state=cache_state, fallback=True)
    unknown = 0
    for position, source_id in enumerate(answer):
        if source_id in candidates:
            continue
        unknown += 1
        # The rejected id is never recorded, not even hashed: it may name a source the caller
        # may not use, and such a source's existence must not reach the audit trail.
        invocation.audit.note(
            AuditEvent.LLM_UNKNOWN_SOURCE_REJECTED,
            outcome="rejected",
            dimensions={"answer_position": position},
        )
    chosen = candidates & set(answer)
    if cache is not None and key is not None:
        await _cache_set(cache, key, [s.source.id for s in optional if s.source.id in chosen], ctx)
    return _Choice(chosen=chosen, cache_state=cache_state, unknown=unknown)


def selection_configuration(candidates: Sequence[Source], capability: Capability) -> str:
    """Return the ``configuration_fingerprint`` of the configuration a selection prompt reads.

    That is the optional candidates in the order they are shown, and the capability's model
    profile and datamarking. Mappings and forced sources never reach the prompt, so a change
    to them keeps a cached choice; any change to a candidate (its business metadata included)
    does not.
    """
    return configuration_fingerprint(
        {
            "candidates": list(candidates),
            "model_profile": capability.model_profile,
            "datamark_untrusted": capability.datamark_untrusted,
        }
    )


async def _ask_model(
    ctx: InvocationContext, scope: EffectiveScope, request: str, model: LanguageModel
) -> tuple[str, ...] | None:
    candidates = [s.source for s in scope.optional()]
    prompt = build_selection_prompt(
        request,
        candidates,
        model_profile=scope.capability.model_profile,
        datamark=datamark_for(scope.capability.datamark_untrusted),
    )
    try:
        return parse_selection(await model.complete(prompt), candidates=len(candidates))
    except Exception:
        # Any model failure degrades to the forced sources; the cause goes to the log only
        # (asyncio.CancelledError is not an Exception and still propagates).
        _log.warning("source selection failed in invocation %s", ctx.correlation_id, exc_info=True)
        return None


async def _cache_get(cache: Cache, key: str, ctx: InvocationContext) -> list[str] | None:
    try:
        raw = await cache.get(key)
    except Exception:
        # The cache only saves a model call; an unreachable cache must not fail the search.
        _log.warning("selection cache read failed in invocation %s", ctx.correlation_id)
        return None
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        # The cache is storage outside the core: an entry it holds that is not ours (or
        # nests "[[[…" past the recursion limit) is a miss, never a failed search.
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


async def _cache_set(cache: Cache, key: str, chosen: list[str], ctx: InvocationContext) -> None:
    try:
        await cache.set(key, json.dumps(chosen).encode("utf-8"), SELECTION_TTL_S)
    except Exception:
        _log.warning("selection cache write failed in invocation %s", ctx.correlation_id)
