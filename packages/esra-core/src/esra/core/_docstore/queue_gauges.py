"""The ingestion queue's gauges: how many documents wait, and for how long, per tenant.

- ``esra.ingestion.queue.depth`` ({document}): the tenant's waiting documents;
- ``esra.ingestion.queue.age`` (s): how long the longest-waiting one has waited.

OpenTelemetry calls an observable gauge's callback synchronously, on the metric reader's
thread, so the callback cannot query a store. The worker reads each tenant's queue after
the tenant's turn (:func:`read_queue`) and the callbacks publish the latest reading of
every tenant it has served. The age is taken at observation, from the reading's oldest
queued time and the worker's clock, so it keeps growing while that document waits.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from opentelemetry.metrics import CallbackOptions, Observation

from esra.core._docstore.queue_stats import QueueStats
from esra.core._docstore.repository import DocumentRepository
from esra.core._telemetry import TENANT_ID, meter
from esra.core.ports import Clock

__all__ = ["QueueReadings", "read_queue", "readings"]

_log = logging.getLogger(__name__)


class QueueReadings:
    """The latest queue reading of each tenant, shared between the event loop that records
    them and the reader thread that observes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[QueueStats, Clock]] = {}

    def record(self, tenant_id: str, stats: QueueStats, clock: Clock) -> None:
        """Keep ``stats`` as ``tenant_id``'s latest reading, aged by ``clock``."""
        with self._lock:
            self._latest[tenant_id] = (stats, clock)

    def depths(self, _options: CallbackOptions | None = None) -> Iterable[Observation]:
        """One observation per tenant: its waiting documents."""
        with self._lock:
            latest = list(self._latest.items())
        return [Observation(stats.waiting, {TENANT_ID: tenant}) for tenant, (stats, _) in latest]

    def ages(self, _options: CallbackOptions | None = None) -> Iterable[Observation]:
        """One observation per tenant: seconds its longest-waiting document has waited."""
        with self._lock:
            latest = list(self._latest.items())
        return [
            Observation(stats.age_s(clock.now()), {TENANT_ID: tenant})
            for tenant, (stats, clock) in latest
        ]


_READINGS = QueueReadings()
meter().create_observable_gauge(
    "esra.ingestion.queue.depth",
    callbacks=[_READINGS.depths],
    unit="{document}",
    description="Documents waiting to be indexed, per tenant.",
)
meter().create_observable_gauge(
    "esra.ingestion.queue.age",
    callbacks=[_READINGS.ages],
    unit="s",
    description="How long the longest-waiting document has waited to be indexed, per tenant.",
)


def readings() -> QueueReadings:
    """The process's readings, which the gauges publish."""
    return _READINGS


async def read_queue(repository: DocumentRepository, tenant_id: str, *, clock: Clock) -> None:
    """Read ``tenant_id``'s queue from ``repository`` and make it the gauges' latest reading.

    A failed read keeps the previous reading and is logged by type only: the gauges never
    end a worker's turn, and a driver's message can quote the store's location.
    """
    try:
        stats = await repository.queue_stats(tenant_id)
    except Exception as exc:
        _log.warning(
            "queue of tenant %s unreadable for its gauges: %s", tenant_id, type(exc).__name__
        )
        return
    _READINGS.record(tenant_id, stats, clock)
