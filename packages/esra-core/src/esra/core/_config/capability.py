"""Capability: which sources a tool binds, how, and within which limits."""

from __future__ import annotations

from enum import StrEnum

import attrs

__all__ = [
    "BindingMode",
    "Capability",
    "CapabilityLimits",
    "RerankWeights",
    "ResponseMode",
    "SourceBinding",
]


class BindingMode(StrEnum):
    """Mandatory and policy-forced sources are searched unconditionally, never model-chosen."""

    MANDATORY = "mandatory"
    OPTIONAL = "optional"
    POLICY_FORCED = "policy_forced"


class ResponseMode(StrEnum):
    """What an invocation may return."""

    RESULTS = "results"
    ANSWER = "answer"


@attrs.frozen
class SourceBinding:
    """A source bound to a capability."""

    source_id: str
    mode: BindingMode = BindingMode.OPTIONAL


@attrs.frozen
class RerankWeights:
    """``final = semantic × semantic_weight + weighted × lexical_weight``."""

    semantic: float = 0.7
    lexical: float = 0.3


@attrs.frozen
class CapabilityLimits:
    """Bounds applied to every invocation of the capability."""

    max_rows_per_query: int = 50
    max_total_queries: int = 24
    max_rerank_candidates: int = 40
    invocation_timeout_s: float = 20.0
    attempt_timeout_s: float = 5.0
    retry_attempts: int = 3
    invocation_concurrency: int = 8
    source_concurrency: int = 4
    # Room for every content word of a long question in one ORed query: a lower cap made
    # planners drop words, and a question's most telling word is often one of its last.
    max_terms_per_query: int = 48
    max_term_chars: int = 200
    # How long a complete response may be served again from the cache; 0 turns it off.
    result_cache_ttl_s: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))


@attrs.frozen
class Capability:
    """A governed retrieval capability over a set of bound sources.

    ``response_modes`` holds ``ANSWER`` when invocations may compose a short cited answer from
    the results of sources that permit it. ``datamark_untrusted`` (off by default) turns on
    Spotlighting's datamarking of the reference data in every prompt the capability's
    invocations send: selection, planning, rerank and answer.
    """

    id: str
    tenant_id: str
    name: str
    bindings: tuple[SourceBinding, ...]
    response_modes: frozenset[ResponseMode] = frozenset({ResponseMode.RESULTS})
    limits: CapabilityLimits = CapabilityLimits()
    rerank_weights: RerankWeights = RerankWeights()
    model_profile: str = "default"
    datamark_untrusted: bool = False
