"""``esra worker``: the ingestion worker process over every document store the host serves.

Each store is opened through the ``DocumentStoreRegistry`` by its source's kind — a SQLite
file, a PostgreSQL schema, whatever an installed distribution registers — and gets one
``IngestionWorker``; stores at one location (tenants sharing a database) share one. A turn
gives every store one ``run_turn()`` (a bounded batch per tenant with work, each document
claimed as it is started and its lease renewed while it is extracted, so several workers —
processes on one machine or on many, on one SQLite file or one PostgreSQL store — share a
store fairly). Stores, like the tenants within one, are served in a ``RoundRobin``: the
worker's first turn starts where its id puts it and each later one continues after the last
store it served, so no store is always first and workers do not all start on the same one.
While any document was claimed the next turn starts at once; when nothing was, the worker
waits ``interval_s`` or until it is stopped. A stop (SIGINT, SIGTERM, or the ``stop`` event
in tests) takes effect between documents: the document in hand is finished (its outcome
written, its lease no longer renewed), nothing more is claimed and the run ends, so a
``systemctl stop`` waits for one document rather than batches and never leaves a document to
its lease; a worker killed outright stops renewing the one lease it holds, which lapses so
another worker claims that document again at its next attempt. After each turn
the worker reads what is left in the queue of every tenant it served, for the
``esra.ingestion.queue.*`` gauges (``esra.core._docstore.queue_gauges``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import attrs

from esra.core import SystemClock
from esra.core.docstore import (
    DocumentRepository,
    DocumentStoreRegistry,
    IndexedHook,
    IngestionWorker,
    OpenedStore,
    RoundRobin,
    StoreSettings,
    TenantTurn,
    TurnTotals,
    read_queue,
    run_turns,
)
from esra.core.ports import Clock
from esra.starlette._stores import StoreSpec, store_request

__all__ = [
    "DEFAULT_INTERVAL_S",
    "StoreUnavailableError",
    "WorkerReport",
    "default_worker_id",
    "describe_turn",
    "open_stores",
    "require_initialised",
    "run_worker",
    "serve_worker",
    "stop_on_signals",
]

DEFAULT_INTERVAL_S = 5.0
_log = logging.getLogger(__name__)


class StoreUnavailableError(Exception):
    """A store cannot be opened or its schema applied; the message names its location."""


@attrs.define
class WorkerReport(TurnTotals):
    """What a worker run did, summed over its turns, and which stores it could not serve."""

    unreachable_tenants: set[str] = attrs.field(factory=set)
    # The locations of the stores without their schema when the run ended: never served.
    uninitialised: set[Path | str] = attrs.field(factory=set)


def describe_turn(turn: TenantTurn) -> str:
    """One line for the log: the tenant's tally, and whether its batch bound was reached, its
    store was unreachable or a stop ended the turn there."""
    line = (
        f"tenant {turn.tenant_id}: claimed {turn.claimed}, indexed {turn.indexed}, "
        f"quarantined {turn.quarantined}, failed {turn.failed}, retried {turn.retried}, "
        f"lost {turn.lost}"
    )
    if turn.bound_reached:
        line += "; batch bound reached, more queued"
    if turn.unreachable:
        line += "; store unreachable, turn ended"
    if turn.stopped:
        line += "; stop requested, the rest stays queued"
    return line


def default_worker_id() -> str:
    """Host, process and a random suffix: unique per process, readable in the store."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@contextlib.asynccontextmanager
async def open_stores(
    stores: Mapping[str, StoreSpec],
    *,
    registry: DocumentStoreRegistry | None = None,
) -> AsyncIterator[dict[Path | str, OpenedStore]]:
    """Open each distinct store (by location) of ``stores``; close them all on exit.

    Nothing is initialised here: a store is initialised only by the audited lifecycle
    action (the admin API, the portal, or ``esra ingest`` on the embedded default's behalf;
    ``esra.starlette._store_init``), never as a side effect of opening it. See
    :func:`require_initialised`.

    Raises:
        UnknownStoreKindError, ProviderOptionError: a store's kind or options are refused.
    """
    registry = registry or DocumentStoreRegistry.from_entry_points()
    opened: dict[Path | str, OpenedStore] = {}
    try:
        for tenant_id, spec in stores.items():
            store = await registry.open(store_request(tenant_id, spec))
            if store.location in opened:
                await store.close()  # another tenant's store at the same location
                continue
            opened[store.location] = store
        yield opened
    finally:
        for store in opened.values():
            await store.close()


async def require_initialised(store: OpenedStore) -> None:
    """Raise unless ``store`` holds its schema.

    Raises:
        StoreUnavailableError: the store is not initialised (or cannot be reached).
    """
    if not await store.schema_present():
        msg = (
            f"the document store {store.location} is not initialised: enable and initialise "
            "it through the admin API first"
        )
        raise StoreUnavailableError(msg)


async def run_worker(
    stores: Mapping[str, StoreSpec],
    *,
    stop: asyncio.Event,
    worker_id: str,
    clock: Clock | None = None,
    once: bool = False,
    interval_s: float = DEFAULT_INTERVAL_S,
    settings_for: Callable[[str], StoreSettings] = lambda _tenant: StoreSettings(),
    on_indexed: IndexedHook | None = None,
    registry: DocumentStoreRegistry | None = None,
) -> WorkerReport:
    """Drain the stores' queues until ``stop`` is set (or, with ``once``, until none has work).

    Args:
        stores: per tenant, its store (``Runtime.stores``, or a SQLite file); tenants whose
            stores share a location share its worker.
        stop: set to end the run after the document in hand: nothing more is claimed.
        worker_id: the claims' owner; unique per worker process.
        clock: time for leases (the system clock by default).
        once: return as soon as a turn claims nothing, instead of waiting for more work.
        interval_s: how long to wait after a turn that claimed nothing.
        settings_for: the store settings of a tenant.
        on_indexed: awaited after each document indexed (``esra.starlette._warming``'s
            ``StoreWarmer``); its errors are logged by type and never fail the indexing.
        registry: opens stores by kind (default: the installed ``esra.document_stores``).

    Raises:
        UnknownStoreKindError, ProviderOptionError: a store's kind or options are refused.
    """
    clock = clock or SystemClock()
    report = WorkerReport()
    async with open_stores(stores, registry=registry) as opened:
        waiting = dict(sorted(opened.items(), key=lambda item: str(item[0])))
        # By location, as text (a SQLite file's Path, a PostgreSQL store's name).
        workers: dict[str, tuple[IngestionWorker, DocumentRepository]] = {}
        store_order = RoundRobin(worker_id)
        _log.info("worker %s serving %d document store(s)", worker_id, len(waiting))

        async def turn() -> list[TenantTurn]:
            # A store initialised while the worker runs is picked up on the next turn.
            for location, store in list(waiting.items()):
                if not await store.schema_present():
                    continue
                del waiting[location]
                worker = IngestionWorker(
                    store.repository,
                    worker_id=worker_id,
                    clock=clock,
                    settings_for=settings_for,
                    on_indexed=on_indexed,
                )
                workers[str(location)] = (worker, store.repository)
            if report.turns == 0 and waiting:
                _log.warning(
                    "not initialised yet, skipped until it is: %s",
                    ", ".join(str(location) for location in waiting),
                )
            report.uninitialised = set(waiting)
            turns: list[TenantTurn] = []
            for location in store_order.order(workers):
                if stop.is_set():
                    break  # the stores not reached yet are not touched
                worker, repository = workers[location]
                served = await worker.run_turn(stop=stop)
                store_order.served(location)
                for each in served:
                    # What is left waiting, for the queue gauges (a tenant that has no work
                    # is not served again, so its last reading, drained, stays true).
                    if not each.unreachable:
                        await read_queue(repository, each.tenant_id, clock=clock)
                turns.extend(served)
            for each in turns:
                _log.info("%s", describe_turn(each))
                if each.unreachable:
                    report.unreachable_tenants.add(each.tenant_id)
            return turns

        await run_turns(turn, report, stop=stop, until_idle=once, idle_wait_s=interval_s)
    _log.info(
        "worker %s stopped: indexed %d, quarantined %d, failed %d, retried %d, lost %d",
        worker_id,
        report.indexed,
        report.quarantined,
        report.failed,
        report.retried,
        report.lost,
    )
    return report


def stop_on_signals(stop: asyncio.Event) -> None:
    """Set ``stop`` on SIGINT or SIGTERM; a second signal then acts as if unhandled.

    The first signal lets the document in hand finish (nothing more is claimed); restoring
    the default handlers means an impatient second Ctrl-C still ends the process at once.
    """
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def request_stop(signum: int) -> None:
        _log.info("%s received: stopping after the document in hand", signal.Signals(signum).name)
        stop.set()
        for each in signals:
            loop.remove_signal_handler(each)

    for each in signals:
        # Loops without signal support (Windows) keep Python's own KeyboardInterrupt.
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(each, request_stop, each)


async def serve_worker(
    stores: Mapping[str, StoreSpec],
    *,
    once: bool,
    interval_s: float,
    worker_id: str,
    on_indexed: IndexedHook | None = None,
    store_settings: StoreSettings | None = None,
    registry: DocumentStoreRegistry | None = None,
) -> int:
    """Run the worker as a process does, until a signal (or drained, with ``once``).

    ``on_indexed``, ``registry``: see :func:`run_worker`. ``store_settings``: every store's
    settings (the lease and its heartbeat among them); the defaults otherwise.

    Returns:
        0, or 1 when a run with ``once`` left a store unreachable or not initialised.

    Raises:
        UnknownStoreKindError, ProviderOptionError: a store's kind or options are refused.
    """
    settings = store_settings or StoreSettings()
    stop = asyncio.Event()
    stop_on_signals(stop)
    report = await run_worker(
        stores,
        stop=stop,
        worker_id=worker_id,
        once=once,
        interval_s=interval_s,
        on_indexed=on_indexed,
        settings_for=lambda _tenant: settings,
        registry=registry,
    )
    if once and report.unreachable_tenants:
        _log.error("unreachable stores: %s", ", ".join(sorted(report.unreachable_tenants)))
    if once and report.uninitialised:
        _log.error(
            "stores not initialised (initialise them through the admin API): %s",
            ", ".join(sorted(str(location) for location in report.uninitialised)),
        )
    return 1 if once and (report.unreachable_tenants or report.uninitialised) else 0
