"""ESRA's own counters: what degraded an invocation, and how often, per tenant.

Each instrument counts classified outcomes only — a stage name, a reason or provider code,
an outcome word — so its attributes are bounded sets and never the caller's data:

- ``esra.fallbacks`` (``esra.stage``: selection, planning, rerank): a model stage that fell
  back to its deterministic default;
- ``esra.plan.rejections`` (``esra.reason``): each planned query the validator rejected;
- ``esra.sources.dropped`` (``esra.cause``): a source left out of an invocation — its
  provider's failure code, ``missing_claim``, ``unavailable`` or ``caller_filter_unsupported``;
- ``esra.result_cache.hits``: invocations answered from the result cache;
- ``esra.fetch.quota_refusals``: fetches refused by the caller's hourly budget;
- ``esra.ingestion.documents`` (``esra.outcome``: indexed, quarantined, failed, retried,
  lost): what each document a worker claimed became;
- ``esra.breaker.transitions`` (``esra.source.id``, ``esra.breaker.state``: the state
  entered, open, half_open or closed): each real state change of a source's circuit breaker.

Every point carries ``esra.tenant.id``. With no OpenTelemetry SDK installed they are no-ops.
"""

from __future__ import annotations

from collections.abc import Iterable

from esra.core._response import ResponseWarning
from esra.core._telemetry import STAGE, TENANT_ID, meter
from esra.core.codes import WarningCode

__all__ = [
    "count_breaker_transition",
    "count_fetch_quota_refusal",
    "count_ingestion",
    "count_plan_rejection",
    "count_result_cache_hit",
    "count_source_dropped",
    "count_warnings",
]

_FALLBACKS = meter().create_counter(
    "esra.fallbacks", description="Model stages that fell back to their deterministic default."
)
_REJECTIONS = meter().create_counter(
    "esra.plan.rejections", description="Planned queries the validator rejected, by reason."
)
_DROPPED = meter().create_counter(
    "esra.sources.dropped", description="Sources left out of an invocation, by cause."
)
_CACHE_HITS = meter().create_counter(
    "esra.result_cache.hits", description="Invocations answered from the result cache."
)
_QUOTA_REFUSALS = meter().create_counter(
    "esra.fetch.quota_refusals", description="Fetches refused by the hourly character budget."
)
_INGESTION = meter().create_counter(
    "esra.ingestion.documents", description="Claimed documents by what they became."
)
_BREAKER_TRANSITIONS = meter().create_counter(
    "esra.breaker.transitions", description="Circuit breaker state changes, by state entered."
)
_FALLBACK_STAGES = {
    WarningCode.ESRA_SELECTION_FALLBACK: "selection",
    WarningCode.ESRA_PLANNING_FALLBACK: "planning",
    WarningCode.ESRA_RERANK_FALLBACK: "rerank",
}
_DROP_CAUSES = {
    WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM: "missing_claim",
    WarningCode.ESRA_SOURCE_UNAVAILABLE: "unavailable",
    WarningCode.ESRA_CALLER_FILTER_UNSUPPORTED: "caller_filter_unsupported",
}


def count_warnings(tenant_id: str, warnings: Iterable[ResponseWarning]) -> None:
    """Count the fallbacks and the non-failure source drops an invocation's warnings name.

    (A failed source is counted by its provider code with :func:`count_source_dropped`.)
    """
    for warning in warnings:
        stage = _FALLBACK_STAGES.get(warning.code)
        if stage is not None:
            _FALLBACKS.add(1, {TENANT_ID: tenant_id, STAGE: stage})
        cause = _DROP_CAUSES.get(warning.code)
        if cause is not None:
            count_source_dropped(tenant_id, cause)


def count_plan_rejection(tenant_id: str, reason: str) -> None:
    """One planned query rejected by the validator for ``reason`` (its code)."""
    _REJECTIONS.add(1, {TENANT_ID: tenant_id, "esra.reason": reason})


def count_source_dropped(tenant_id: str, cause: str) -> None:
    """One source left out of an invocation for ``cause`` (a code or a cause word)."""
    _DROPPED.add(1, {TENANT_ID: tenant_id, "esra.cause": cause})


def count_result_cache_hit(tenant_id: str) -> None:
    """One invocation answered from the result cache."""
    _CACHE_HITS.add(1, {TENANT_ID: tenant_id})


def count_fetch_quota_refusal(tenant_id: str) -> None:
    """One fetch refused by the caller's hourly budget."""
    _QUOTA_REFUSALS.add(1, {TENANT_ID: tenant_id})


def count_ingestion(tenant_id: str, outcome: str) -> None:
    """One claimed document that became ``outcome``."""
    _INGESTION.add(1, {TENANT_ID: tenant_id, "esra.outcome": outcome})


def count_breaker_transition(tenant_id: str, source_id: str, state: str) -> None:
    """``tenant_id``'s breaker of ``source_id`` entered ``state`` (a ``BreakerState`` value)."""
    # str(): a StrEnum member becomes its plain value, as an exporter should see it.
    attributes = {
        TENANT_ID: tenant_id,
        "esra.source.id": source_id,
        "esra.breaker.state": str(state),
    }
    _BREAKER_TRANSITIONS.add(1, attributes)
