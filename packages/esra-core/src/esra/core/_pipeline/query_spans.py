"""The spans and the duration metric of executing one validated query.

Each query is one client span carrying both conventions: the GenAI ``retrieval`` operation
(``gen_ai.data_source.id`` the source, ``gen_ai.retrieval.top_k`` its row limit) and the
stable database ones (``db.system.name`` from the source's provider kind; ``error.type`` and
``db.response.status_code`` the provider's classified code on failure). Every attempt,
retries included, is measured by ``db.client.operation.duration``. Neither carries the
statement, its parameters or a row: the mapping id and the source id are ESRA's
configuration, not the caller's data.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from esra.core._pipeline.values import ValidatedQuery
from esra.core._telemetry import TENANT_ID, error_type, inert_span, meter, tracer
from esra.core.exceptions import ProviderError

__all__ = ["db_system", "failed", "query_span", "timed_attempt"]

# Provider kinds as the database conventions name their systems (``db.system.name``).
_SYSTEMS = {
    "postgres": "postgresql",
    "postgres-document-store": "postgresql",
    "mysql": "mysql",
    "mariadb": "mariadb",
    "sqlserver": "microsoft.sql_server",
    "oracle": "oracle.db",
    "sqlite": "sqlite",
    "sqlite-document-store": "sqlite",
}
_DURATION = meter().create_histogram(
    "db.client.operation.duration",
    unit="s",
    description="Duration of one search statement against a source, each attempt.",
)


def db_system(provider_kind: str) -> str:
    """``db.system.name`` of a provider kind (``other_sql`` for one this module does not know)."""
    return _SYSTEMS.get(provider_kind, "other_sql")


@contextlib.contextmanager
def query_span(query: ValidatedQuery, system: str) -> Iterator[Span]:
    """The client span of one query, all its attempts included.

    One span per query rather than one per attempt under one per query: a span costs tens of
    microseconds of the event loop in the Python SDK, and a retry is rare — each failed
    attempt is an ``esra.attempt_failed`` event on this span instead. With nothing recording
    (see ``inert_span``) no span is started at all.
    """
    inert = inert_span()
    if inert is not None:
        yield inert
        return
    with tracer().start_as_current_span(
        f"retrieval {query.source_id}",
        kind=SpanKind.CLIENT,
        attributes={
            TENANT_ID: query.mapping.tenant_id,
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": query.source_id,
            "gen_ai.retrieval.top_k": query.row_limit,
            "db.system.name": system,
            "esra.mapping.id": query.mapping.id,
        },
        record_exception=False,
    ) as span:
        yield span


def failed(span: Span, code: str) -> None:
    """Mark ``span``'s query failed with the provider's classified ``code``."""
    span.set_attributes({"error.type": code, "db.response.status_code": code})
    span.set_status(StatusCode.ERROR)


@contextlib.contextmanager
def timed_attempt(query: ValidatedQuery, system: str) -> Iterator[None]:
    """One attempt, timed into ``db.client.operation.duration``; a failure is an event on the
    query's span."""
    attributes: dict[str, AttributeValue] = {
        TENANT_ID: query.mapping.tenant_id,
        "db.system.name": system,
        "esra.source.id": query.source_id,
    }
    started = time.perf_counter()
    try:
        yield
    except BaseException as exc:
        failure = exc.code.value if isinstance(exc, ProviderError) else error_type(exc)
        attributes["error.type"] = failure
        trace.get_current_span().add_event("esra.attempt_failed", {"error.type": failure})
        raise
    finally:
        _DURATION.record(time.perf_counter() - started, attributes)
