"""Exporting the host's traces and metrics over OTLP, when its settings ask for it.

``[telemetry]`` in the host settings names an OTLP/HTTP endpoint (a collector); ``esra
serve`` then installs the OpenTelemetry SDK for the life of the process — a tracer provider
with a batch span processor, and a meter provider with a periodic reader — both exporting
there, under the configured ``service.name``. Without ``[telemetry]`` nothing is installed
and the library's spans stay no-ops. The SDK and the exporter are an optional extra
(``esra-starlette[otel]``); settings that ask for export without it installed are refused
at start-up, naming the install command, rather than running silently untraced.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import attrs

from esra.core.exceptions import ConfigurationError

__all__ = ["OTEL_EXTRA", "TelemetrySettings", "exporting"]

OTEL_EXTRA = "pip install 'esra-starlette[otel]'"


@attrs.frozen
class TelemetrySettings:
    """Where and how the host exports telemetry (``[telemetry]``)."""

    otlp_endpoint: str
    service_name: str = "esra"
    traces: bool = True
    metrics: bool = True
    metrics_interval_s: float = 60.0
    sample_ratio: float = 1.0


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        msg = (
            f"[telemetry] asks for OTLP export, but {exc.name or name} is not installed: "
            f"{OTEL_EXTRA}"
        )
        raise ConfigurationError(msg) from exc


@contextlib.contextmanager
def exporting(settings: TelemetrySettings | None) -> Iterator[None]:
    """Install the SDK exporting to ``settings.otlp_endpoint`` for the block (nothing for None).

    On exit every provider is shut down, which flushes the spans and metrics still held.

    Raises:
        ConfigurationError: the ``otel`` extra is not installed.
    """
    if settings is None:
        yield
        return
    from opentelemetry import metrics, trace  # noqa: PLC0415 - the API is always present

    resources = _module("opentelemetry.sdk.resources")
    resource = resources.Resource.create({"service.name": settings.service_name})
    endpoint = settings.otlp_endpoint.rstrip("/")
    providers: list[Any] = []
    if settings.traces:
        sdk_trace = _module("opentelemetry.sdk.trace")
        sampling = _module("opentelemetry.sdk.trace.sampling")
        export = _module("opentelemetry.sdk.trace.export")
        otlp = _module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        tracer_provider = sdk_trace.TracerProvider(
            resource=resource,
            # A client's sampled trace stays sampled here; roots follow the ratio.
            sampler=sampling.ParentBased(sampling.TraceIdRatioBased(settings.sample_ratio)),
        )
        tracer_provider.add_span_processor(
            export.BatchSpanProcessor(otlp.OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
        )
        trace.set_tracer_provider(tracer_provider)
        providers.append(tracer_provider)
    if settings.metrics:
        sdk_metrics = _module("opentelemetry.sdk.metrics")
        metrics_export = _module("opentelemetry.sdk.metrics.export")
        otlp_metrics = _module("opentelemetry.exporter.otlp.proto.http.metric_exporter")
        reader = metrics_export.PeriodicExportingMetricReader(
            otlp_metrics.OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"),
            export_interval_millis=settings.metrics_interval_s * 1000,
        )
        meter_provider = sdk_metrics.MeterProvider(resource=resource, metric_readers=[reader])
        metrics.set_meter_provider(meter_provider)
        providers.append(meter_provider)
    try:
        yield
    finally:
        for provider in providers:
            provider.shutdown()
