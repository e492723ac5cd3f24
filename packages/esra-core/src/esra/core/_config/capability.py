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


_COUNT = attrs.validators.ge(1)
_SECONDS = attrs.validators.gt(0.0)


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
    """Bounds applied to every invocation of the capability.

    Counts are at least 1 and times above 0, as their ceilings' are (``LimitCeilings``): a
    zero or negative bound has no meaning, and was accepted and saved before.
    """

    max_rows_per_query: int = attrs.field(default=50, validator=_COUNT)
    max_total_queries: int = attrs.field(default=24, validator=_COUNT)
    max_rerank_candidates: int = attrs.field(default=40, validator=_COUNT)
    invocation_timeout_s: float = attrs.field(default=20.0, validator=_SECONDS)
    attempt_timeout_s: float = attrs.field(default=5.0, validator=_SECONDS)
    retry_attempts: int = attrs.field(default=3, validator=_COUNT)
    invocation_concurrency: int = attrs.field(default=8, validator=_COUNT)
    source_concurrency: int = attrs.field(default=4, validator=_COUNT)
    # Room for every content word of a long question in one ORed query: a lower cap made
    # planners drop words, and a question's most telling word is often one of its last.
    max_terms_per_query: int = attrs.field(default=48, validator=_COUNT)
    max_term_chars: int = attrs.field(default=200, validator=_COUNT)
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
