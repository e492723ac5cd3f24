"""``esra worker``: the ingestion worker process over every document store the host serves.

Each store database gets one ``IngestionWorker``, and a turn gives every store one
``run_turn()`` (a bounded batch per tenant with work, each document claimed as it is started
and its lease renewed while it is extracted, so several workers share a store fairly). While
any document was claimed the next turn starts at once; when nothing was, the worker waits
``interval_s`` or until it is stopped. A stop (SIGINT, SIGTERM, or the ``stop`` event in
tests) takes effect between turns, so a claimed document is finished rather than left to its
lease; a worker killed outright stops renewing the one lease it holds, which lapses so another
worker claims that document again at its next attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from pathlib import Path

import attrs

from esra.core.clock import SystemClock
from esra.core.docstore.ingestion import IndexedHook, IngestionWorker, TenantTurn
from esra.core.docstore.model import StoreSettings
from esra.core.docstore.worker_loop import TurnTotals, run_turns
from esra.core.ports import Clock
from esra.sqlite import SqliteDocumentRepository
from esra.starlette.stores import schema_present

__all__ = [
    "DEFAULT_INTERVAL_S",
    "StoreUnavailableError",
    "WorkerReport",
    "default_worker_id",
    "describe_turn",
    "initialise_stores",
    "open_repositories",
    "run_worker",
    "serve_worker",
    "stop_on_signals",
]

DEFAULT_INTERVAL_S = 5.0
_log = logging.getLogger(__name__)


class StoreUnavailableError(Exception):
    """A store database cannot be opened or its schema applied; the message names the file."""


@attrs.define
class WorkerReport(TurnTotals):
    """What a worker run did, summed over its turns, and which stores it could not serve."""

    unreachable_tenants: set[str] = attrs.field(factory=set)
    # Store databases without the store schema when the run ended: never served.
    uninitialised: set[Path] = attrs.field(factory=set)


def describe_turn(turn: TenantTurn) -> str:
    """One line for the log: the tenant's tally and whether its batch bound was reached."""
    line = (
        f"tenant {turn.tenant_id}: claimed {turn.claimed}, indexed {turn.indexed}, "
        f"quarantined {turn.quarantined}, failed {turn.failed}, retried {turn.retried}, "
        f"lost {turn.lost}"
    )
    if turn.bound_reached:
        line += "; batch bound reached, more queued"
    if turn.unreachable:
        line += "; store unreachable, turn ended"
    return line


def default_worker_id() -> str:
    """Host, process and a random suffix: unique per process, readable in the store."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@contextlib.asynccontextmanager
async def open_repositories(
    databases: Collection[Path], *, initialise: bool = False
) -> AsyncIterator[list[SqliteDocumentRepository]]:
    """Open one repository per database; close them all.

    A store is initialised by an administrator (``POST /admin/v1/store/initialise``), never
    as a side effect of first use, so a database without the store schema is refused —
    unless ``initialise`` says the caller owns it (the embedded default's store).

    Raises:
        StoreUnavailableError: a database cannot be opened, or is not initialised.
    """
    repositories: list[SqliteDocumentRepository] = []
    try:
        for database in databases:
            if not initialise and not schema_present(database):
                msg = (
                    f"the document store {database} is not initialised: enable and initialise "
                    "it through the admin API first"
                )
                raise StoreUnavailableError(msg)
            repository = SqliteDocumentRepository(database)
            repositories.append(repository)
            if initialise:
                try:
                    await repository.initialize()
                except (sqlite3.Error, OSError) as exc:
                    msg = f"cannot open the document store {database}: {exc}"
                    raise StoreUnavailableError(msg) from exc
        yield repositories
    finally:
        for repository in repositories:
            await repository.close()


async def initialise_stores(databases: Collection[Path]) -> None:
    """Apply the store schema to ``databases`` (stores the caller owns), idempotently.

    Raises:
        StoreUnavailableError: a database cannot be opened or initialised.
    """
    async with open_repositories(databases, initialise=True):
        return


async def run_worker(
    stores: Mapping[str, Path],
    *,
    stop: asyncio.Event,
    worker_id: str,
    clock: Clock | None = None,
    once: bool = False,
    interval_s: float = DEFAULT_INTERVAL_S,
    settings_for: Callable[[str], StoreSettings] = lambda _tenant: StoreSettings(),
    on_indexed: IndexedHook | None = None,
) -> WorkerReport:
    """Drain the stores' queues until ``stop`` is set (or, with ``once``, until none has work).

    Args:
        stores: per tenant, its store database; tenants sharing a database share its worker.
        stop: set to end the run after the current turn.
        worker_id: the claims' owner; unique per worker process.
        clock: time for leases (the system clock by default).
        once: return as soon as a turn claims nothing, instead of waiting for more work.
        interval_s: how long to wait after a turn that claimed nothing.
        settings_for: the store settings of a tenant.
        on_indexed: awaited after each document indexed (``esra.starlette.warming``'s
            ``StoreWarmer``); its errors are logged by type and never fail the indexing.

    Raises:
        StoreUnavailableError: a database cannot be opened.
    """
    clock = clock or SystemClock()
    waiting = sorted({path.resolve() for path in stores.values()})
    report = WorkerReport()
    async with contextlib.AsyncExitStack() as opened:
        workers: list[IngestionWorker] = []
        _log.info("worker %s serving %d document store(s)", worker_id, len(waiting))

        async def turn() -> list[TenantTurn]:
            # A store initialised while the worker runs is picked up on the next turn.
            ready = [database for database in waiting if schema_present(database)]
            for database in ready:
                waiting.remove(database)
                (repository,) = await opened.enter_async_context(open_repositories([database]))
                workers.append(
                    IngestionWorker(
                        repository,
                        worker_id=worker_id,
                        clock=clock,
                        settings_for=settings_for,
                        on_indexed=on_indexed,
                    )
                )
            if report.turns == 0 and waiting:
                _log.warning(
                    "not initialised yet, skipped until it is: %s",
                    ", ".join(str(database) for database in waiting),
                )
            report.uninitialised = set(waiting)
            turns = [each for worker in workers for each in await worker.run_turn()]
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

    The first signal lets the current turn finish; restoring the default handlers means an
    impatient second Ctrl-C still ends the process at once.
    """
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)

    def request_stop(signum: int) -> None:
        _log.info("%s received: stopping after the current turn", signal.Signals(signum).name)
        stop.set()
        for each in signals:
            loop.remove_signal_handler(each)

    for each in signals:
        # Loops without signal support (Windows) keep Python's own KeyboardInterrupt.
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(each, request_stop, each)


async def serve_worker(
    stores: Mapping[str, Path],
    *,
    once: bool,
    interval_s: float,
    worker_id: str,
    on_indexed: IndexedHook | None = None,
    store_settings: StoreSettings | None = None,
) -> int:
    """Run the worker as a process does, until a signal (or drained, with ``once``).

    ``on_indexed``: see :func:`run_worker`. ``store_settings``: every store's settings (the
    lease and its heartbeat among them); the defaults otherwise.

    Returns:
        0, or 1 when a run with ``once`` left a store unreachable or not initialised.

    Raises:
        StoreUnavailableError: a database cannot be opened.
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
    )
    if once and report.unreachable_tenants:
        _log.error("unreachable stores: %s", ", ".join(sorted(report.unreachable_tenants)))
    if once and report.uninitialised:
        _log.error(
            "stores not initialised (initialise them through the admin API): %s",
            ", ".join(str(database) for database in sorted(report.uninitialised)),
        )
    return 1 if once and (report.unreachable_tenants or report.uninitialised) else 0
