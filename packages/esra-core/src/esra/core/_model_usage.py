"""Model token usage: reported by model adapters, summed per invocation for its audit record.

A remote model client calls ``report_model_usage`` after every response that states its
token usage; the Retriever runs each invocation under ``metered()`` and puts the totals on
the invocation's ``esra.retrieve`` audit record. A model that reports nothing (the local
model, the fakes) leaves that record exactly as before, so the ``LanguageModel`` port is
unchanged.

The meter travels in a context variable rather than on the model: one client serves
concurrent invocations, and planning calls it concurrently within one, so a ``last_usage``
attribute would mix their figures up. asyncio copies the context into every task it starts,
and the copies share the invocation's one meter, so every call of an invocation, and only
those, adds to it. Only counts are kept: never a prompt, an answer or a model name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypedDict

import attrs
from opentelemetry import trace

from esra.core._telemetry import TENANT_ID, current_span_tenant
from esra.core._telemetry import meter as otel_meter

__all__ = [
    "ModelUsage",
    "UsageDimensions",
    "UsageMeter",
    "current_meter",
    "metered",
    "report_model_usage",
]

_TOKEN_USAGE = otel_meter().create_histogram(
    "gen_ai.client.token.usage", unit="{token}", description="Tokens one model call used."
)


class UsageDimensions(TypedDict, total=False):
    """The audit dimensions a meter adds; none at all when no model reported usage."""

    model_calls: int
    model_input_tokens: int
    model_output_tokens: int


@attrs.frozen
class ModelUsage:
    """The tokens one model response consumed, as the vendor reported them."""

    input_tokens: int = attrs.field(validator=attrs.validators.ge(0))
    output_tokens: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.define
class UsageMeter:
    """Running totals for one invocation: responses that reported usage, and their tokens."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, usage: ModelUsage) -> None:
        """Count one response's usage."""
        self.calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens

    def dimensions(self) -> UsageDimensions:
        """Return the audit dimensions: empty when no model reported usage."""
        if not self.calls:
            return {}
        return {
            "model_calls": self.calls,
            "model_input_tokens": self.input_tokens,
            "model_output_tokens": self.output_tokens,
        }


# The enclosing meters, outermost first: a report counts in each, so a host may meter a
# larger unit (a batch, one MCP request) around the Retriever's per-invocation meter.
_METERS: ContextVar[tuple[UsageMeter, ...]] = ContextVar("esra_model_usage", default=())


@contextmanager
def metered() -> Iterator[UsageMeter]:
    """Meter the model usage reported inside the block (and the tasks it starts).

    Meters nest: usage reported inside an inner block counts in every enclosing meter too.
    """
    meter = UsageMeter()
    token = _METERS.set((*_METERS.get(), meter))
    try:
        yield meter
    finally:
        _METERS.reset(token)


def current_meter() -> UsageMeter | None:
    """Return the meter of the innermost enclosing ``metered()`` block, if any."""
    meters = _METERS.get()
    return meters[-1] if meters else None


def report_model_usage(usage: ModelUsage) -> None:
    """Add ``usage`` to every enclosing meter (outside any, to none), and record it in
    ``gen_ai.client.token.usage`` with the invocation's tenant (sampled or not)."""
    for meter in _METERS.get():
        meter.add(usage)
    # Inside a traced call, the usage belongs to its ``chat`` span (esra.core._traced_model).
    trace.get_current_span().set_attributes(
        {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
        }
    )
    tenant = current_span_tenant()
    for token_type, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
        _TOKEN_USAGE.record(
            count,
            {"gen_ai.operation.name": "chat", "gen_ai.token.type": token_type, TENANT_ID: tenant},
        )
