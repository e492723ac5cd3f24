"""OpenTelemetry for the pipeline: one tracer, one meter, and what a span may carry.

The library depends on ``opentelemetry-api`` only. Without an SDK configured by the host or
the embedder every span and instrument is a no-op, so tracing costs nothing until someone
asks for it. The MCP server span of each call comes from the ``mcp`` SDK (its
``OpenTelemetryMiddleware``, which follows the MCP semantic conventions and takes its parent
from the request's ``params._meta``); the pipeline's spans are its children.

What a span or a metric may carry is decided here, once: the tenant, the correlation id,
ESRA's own identifiers (source, exposure and capability ids, stage names, classified codes)
and counts. Never the prompt, a claim value, a search term, a filter value, a result, or SQL
text — those are the caller's data, and a trace backend is not governed like the audit log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from esra.core._context import InvocationContext
from esra.core.exceptions import EsraError

__all__ = [
    "CORRELATION_ID",
    "STAGE",
    "TENANT_ID",
    "current_span_tenant",
    "current_trace_id",
    "error_type",
    "inert_span",
    "invocation_attributes",
    "meter",
    "stage_span",
    "tracer",
]

# ESRA's attributes (the semantic conventions have no tenant): on every span and metric.
TENANT_ID = "esra.tenant.id"
CORRELATION_ID = "esra.correlation_id"
STAGE = "esra.stage"  # on metrics that count per stage (spans are named by theirs)
# Proxies until a host or embedder installs an SDK provider, then delegating to it: asked
# for once, at import, so a span costs no provider lookup.
_TRACER = trace.get_tracer("esra")
_METER = metrics.get_meter("esra")
# The tenant of the invocation running in this context, whether or not its spans record: an
# unsampled span (``sample_ratio`` < 1, a caller's trace with sampled=0) carries no
# attributes, yet every metric point must still name its tenant. Set for each stage's block
# (see ``stage_span``), reset when it ends; asyncio copies it into the tasks a stage starts.
_TENANT: ContextVar[str] = ContextVar("esra_tenant", default="")


def tracer() -> trace.Tracer:
    """ESRA's tracer (the global provider's, whenever that is installed)."""
    return _TRACER


def meter() -> metrics.Meter:
    """ESRA's meter (the global provider's, whenever that is installed)."""
    return _METER


def inert_span() -> Span | None:
    """The span starting one would give when that changes nothing, else ``None``.

    With no tracer provider installed, ESRA's tracer delegates to the API's no-op one: its
    "new" span is the current span when that does not record (the invalid span when there is
    none), and making it current again changes nothing. Callers
    then use this span as it is, sparing the no-op's nested context managers and context
    switch (several µs a span, a dozen spans a call). Once a provider is installed, or when a
    recording span is current, this is ``None`` and spans are started as always.
    """
    # What ESRA's proxy tracer delegates to right now, by its own rule (no provider yet: the
    # no-op tracer); asking it spares the environment look-up ``get_tracer_provider`` makes.
    # A tracer without this attribute (a real one, or a future API's proxy) starts spans.
    if not isinstance(getattr(_TRACER, "_tracer", None), trace.NoOpTracer):
        return None
    span = trace.get_current_span()
    return span if isinstance(span, trace.NonRecordingSpan) else None


def error_type(exc: BaseException) -> str:
    """``error.type`` for ``exc``: ESRA's classified code, else the exception's class name.

    Never the message: a driver's or parser's message can quote SQL, hosts or values.
    """
    if isinstance(exc, EsraError):
        return exc.code.value
    return type(exc).__qualname__


def invocation_attributes(ctx: InvocationContext) -> dict[str, AttributeValue]:
    """The attributes every span of an invocation carries: tenant and correlation id."""
    return {TENANT_ID: ctx.tenant_id, CORRELATION_ID: ctx.correlation_id}


@contextlib.contextmanager
def stage_span(
    stage: str,
    ctx: InvocationContext,
    *,
    name: str | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> Iterator[Span]:
    """A span for one pipeline stage of ``ctx``'s invocation, current while the block runs.

    ``ctx``'s tenant is the one ``current_span_tenant`` answers inside the block, whether the
    span records or not (an unsampled invocation's metrics still name their tenant).
    A failure sets ``error.type`` (see :func:`error_type`) and the error status; the
    exception itself is not recorded, since its message may quote what a span must not.
    """
    # The tenant is the invocation's whether or not this span records (see _TENANT).
    tenant = _TENANT.set(ctx.tenant_id)
    try:
        inert = inert_span()
        if inert is not None:
            # Nothing records: what a failure would set on the span is not set anywhere either.
            yield inert
            return
        with tracer().start_as_current_span(
            name or f"esra.{stage}",
            kind=kind,
            # The stage is the span's name; every attribute costs the SDK a validation pass.
            attributes={**invocation_attributes(ctx), **(attributes or {})},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                span.set_attribute("error.type", error_type(exc))
                span.set_status(StatusCode.ERROR)
                raise
    finally:
        _TENANT.reset(tenant)


def current_span_tenant() -> str:
    """The tenant of the invocation running here ("" outside one): for code that has no
    context, such as a metric recorded by a model client or a cache adapter.

    That is the tenant of the enclosing pipeline stage (``stage_span``), sampled or not;
    outside every stage, the tenant the current span names (a host's own span carrying
    ``esra.tenant.id``), which only a recording span can.
    """
    tenant = _TENANT.get()
    if tenant:
        return tenant
    attributes = getattr(trace.get_current_span(), "attributes", None) or {}
    return str(attributes.get(TENANT_ID, ""))


def current_trace_id() -> str | None:
    """The current span's trace id (32 hex digits), or None outside a recorded trace.

    An unsampled span has a valid id too, but no backend holds it: nothing to look up.
    """
    context = trace.get_current_span().get_span_context()
    if not (context.is_valid and context.trace_flags.sampled):
        return None
    return format(context.trace_id, "032x")
