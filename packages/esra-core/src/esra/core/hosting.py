"""What a host composes around the ``Retriever``.

Configuration repositories and the follower that applies publications live, the
opened providers, the outbound host allowlist, the in-process quota store, what the
``Executor`` reports and breaks circuits with, and the limits and helpers a tool listing
needs.
"""

from esra.core._config.client_snapshot import ClientSnapshotCache
from esra.core._durable_config import DurableConfigRepository
from esra.core._live_config import DEFAULT_POLL_S, ConfigFollower
from esra.core._opened_providers import OpenedProviders
from esra.core._outbound_allowlist import ConfiguredHostAllowlist, parse_host_port
from esra.core._pipeline.caller_filters import (
    MAX_CALLER_FILTERS,
    CallerFilterField,
    listed_filter_fields,
)
from esra.core._pipeline.execution import ExecutionOutcome, QueryResult, SourceFailure
from esra.core._pipeline.health import HEALTH_PROBE_TIMEOUT_S, HEALTH_TTL_S
from esra.core._pipeline.resilience import CircuitBreaker
from esra.core._pipeline.scope import admitted_exposure
from esra.core._quota import InProcessQuotaStore
from esra.core._retriever import MAX_REQUEST_CHARS

__all__ = [
    "DEFAULT_POLL_S",
    "HEALTH_PROBE_TIMEOUT_S",
    "HEALTH_TTL_S",
    "MAX_CALLER_FILTERS",
    "MAX_REQUEST_CHARS",
    "CallerFilterField",
    "CircuitBreaker",
    "ClientSnapshotCache",
    "ConfigFollower",
    "ConfiguredHostAllowlist",
    "DurableConfigRepository",
    "ExecutionOutcome",
    "InProcessQuotaStore",
    "OpenedProviders",
    "QueryResult",
    "SourceFailure",
    "admitted_exposure",
    "listed_filter_fields",
    "parse_host_port",
]
