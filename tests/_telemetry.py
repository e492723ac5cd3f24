"""An OpenTelemetry SDK for the tests that read spans and metrics back, off for all others.

A process has one global tracer and meter provider, installed once. Its sampler records
nothing unless a test is inside ``recording()``, so every other test runs as with no SDK at
all: spans are non-recording and audit records carry no trace id.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

__all__ = ["Recorded", "recording"]


class _Switch(Sampler):
    """Records every span while on, none while off."""

    def __init__(self) -> None:
        self.on = False

    def should_sample(  # noqa: PLR0917 - the SDK's Sampler signature
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        # The SDK takes the span's attributes from the result: hand them through.
        if not self.on:
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "tests' recording switch"


_SWITCH = _Switch()
_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()
_INSTALLING = threading.Lock()
_INSTALLED: list[bool] = []


def _install() -> None:
    with _INSTALLING:
        if _INSTALLED:
            return
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
        _INSTALLED.append(True)


@attrs.frozen
class Recorded:
    """What the block recorded: its finished spans, and the metrics read on demand."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> tuple[ReadableSpan, ...]:
        """The spans finished so far, in the order they ended."""
        return tuple(self.exporter.get_finished_spans())

    def points(self, name: str) -> list[tuple[Mapping[str, Any], Any]]:
        """Every data point of the metric ``name``: its attributes and the point itself."""
        data = self.reader.get_metrics_data()
        found: list[tuple[Mapping[str, Any], Any]] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend((dict(p.attributes or {}), p) for p in metric.data.data_points)
        return found


@contextlib.contextmanager
def recording() -> Iterator[Recorded]:
    """Record every span (and metric) of the block."""
    _install()
    _EXPORTER.clear()
    _SWITCH.on = True
    try:
        yield Recorded(_EXPORTER, _READER)
    finally:
        _SWITCH.on = False
