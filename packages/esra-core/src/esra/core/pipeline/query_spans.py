"""The spans and the duration metric of executing one validated query.

Each query is a GenAI ``retrieval`` span (``gen_ai.operation.name = retrieval``,
``gen_ai.data_source.id`` the source, ``gen_ai.retrieval.top_k`` its row limit); each attempt
inside it (retries included) is a database client span following the stable database
conventions — ``db.system.name`` from the source's provider kind, ``error.type`` and
``db.response.status_code`` the provider's classified code on failure — and is measured by
``db.client.operation.duration``. None of them carries the statement, its parameters or a
row: the mapping id and the source id are ESRA's configuration, not the caller's data.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from esra.core.exceptions import ProviderError
from esra.core.telemetry import TENANT_ID, error_type, meter, tracer
from esra.core.validation import ValidatedQuery

__all__ = ["database_span", "db_system", "retrieval_span"]

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
def retrieval_span(query: ValidatedQuery) -> Iterator[Span]:
    """The span of one query, all its attempts included."""
    with tracer().start_as_current_span(
        f"retrieval {query.source_id}",
        kind=SpanKind.INTERNAL,
        attributes={
            TENANT_ID: query.mapping.tenant_id,
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": query.source_id,
            "gen_ai.retrieval.top_k": query.row_limit,
            "esra.mapping.id": query.mapping.id,
        },
        record_exception=False,
    ) as span:
        yield span


@contextlib.contextmanager
def database_span(query: ValidatedQuery, system: str) -> Iterator[Span]:
    """One attempt's database client span, timed into ``db.client.operation.duration``."""
    attributes: dict[str, AttributeValue] = {
        TENANT_ID: query.mapping.tenant_id,
        "db.system.name": system,
        "esra.source.id": query.source_id,
    }
    started = time.perf_counter()
    with tracer().start_as_current_span(
        f"search {system}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            failure = error_type(exc)
            if isinstance(exc, ProviderError):
                failure = exc.code.value
                span.set_attribute("db.response.status_code", failure)
            span.set_attribute("error.type", failure)
            span.set_status(StatusCode.ERROR)
            attributes["error.type"] = failure
            raise
        finally:
            _DURATION.record(time.perf_counter() - started, attributes)
