"""A document-store ingestion worker process: ``python -m esra.postgres.store_worker``.

**Deprecated:** ``esra worker --config settings.toml`` serves a tenant store of kind
``postgres-document-store`` (its template resolved through the host's secrets and outbound
allowlist) together with every other store the host serves. This entry point still works
in this release and says so on stderr; it is removed in a later one. ``run_worker`` stays a
library function.

Runs ``esra.core.docstore.IngestionWorker`` turns over a
``PostgresDocumentRepository`` until stopped (SIGTERM / SIGINT finish the document in hand,
claim nothing more and exit) or, with ``--until-idle``, until a turn finds no work. Any
number of these may run against one store: claims use ``FOR UPDATE SKIP LOCKED`` and take
one document at a time, whose lease the worker renews every ``--heartbeat-s`` while
extracting it; a worker that dies mid-document stops renewing, so another worker picks the
document up once the lease (``--lease-s``) lapses.

On exit it prints one JSON line: what it did and its peak resident memory (its own, and
the largest of the PDF extraction subprocesses it waited for).

This entry point takes a libpq DSN because it is run by the operator next to the store; an
embedding host would build the repository from the store's allow-listed template instead.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import resource
import signal
import sys
from collections.abc import Sequence

import attrs

from esra.core import SystemClock
from esra.core.docstore import (
    IngestionWorker,
    StoreSettings,
    TurnTotals,
    run_turns,
    sandbox_peak_rss_kb,
)
from esra.postgres._store_repository import PostgresDocumentRepository
from esra.postgres._store_schema import DEFAULT_STORE_SCHEMA

__all__ = ["DEPRECATION_NOTICE", "WorkerSummary", "main", "run_worker"]

_log = logging.getLogger("esra.postgres.store_worker")
DEPRECATION_NOTICE = (
    "esra: python -m esra.postgres.store_worker is deprecated and will be removed: configure "
    "the tenant's store as a source of kind postgres-document-store and run "
    "`esra worker --config settings.toml` instead (see docs/document-store.md)\n"
)


@attrs.define
class WorkerSummary(TurnTotals):
    """Totals over a worker's turns, its id and its peak memory."""

    worker_id: str = attrs.field(kw_only=True)
    peak_rss_kb: int = 0
    peak_child_rss_kb: int = 0


async def run_worker(
    dsn: str,
    *,
    worker_id: str,
    schema: str = DEFAULT_STORE_SCHEMA,
    settings: StoreSettings | None = None,
    until_idle: bool = False,
    poll_s: float = 1.0,
    stop: asyncio.Event | None = None,
) -> WorkerSummary:
    """Run ingestion turns until ``stop`` is set (or, ``until_idle``, a turn finds nothing).

    A stop set during a turn lets the document in hand finish and claims nothing more.
    """
    stop = stop or asyncio.Event()
    chosen = settings or StoreSettings()
    summary = WorkerSummary(worker_id=worker_id)
    repository = await PostgresDocumentRepository.open(
        dsn, schema=schema, retain_bytes=chosen.retain_bytes, max_size=2
    )
    try:
        worker = IngestionWorker(
            repository,
            worker_id=worker_id,
            clock=SystemClock(),
            settings_for=lambda _tenant: chosen,
        )
        await run_turns(
            # The stop reaches into the turn: it ends after the document in hand.
            functools.partial(worker.run_turn, stop=stop),
            summary,
            stop=stop,
            until_idle=until_idle,
            idle_wait_s=poll_s,
        )
    finally:
        await repository.close()
    summary.peak_rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # PDF children are forked by the core's sandbox server, which reports their peak.
    summary.peak_child_rss_kb = max(
        sandbox_peak_rss_kb(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    )
    return summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m esra.postgres.store_worker")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ESRA_STORE_DSN"),
        help="libpq connection string of the store (default: $ESRA_STORE_DSN, which keeps a "
        "password out of the process list)",
    )
    parser.add_argument("--worker-id", required=True, help="unique per worker process")
    parser.add_argument("--schema", default=DEFAULT_STORE_SCHEMA)
    parser.add_argument(
        "--lease-s",
        type=float,
        default=StoreSettings().lease_s,
        help="the lease on the document being extracted; a worker that dies is noticed when "
        "it lapses (default: %(default)s)",
    )
    parser.add_argument(
        "--heartbeat-s",
        type=float,
        default=None,
        help="how often the lease is renewed during extraction; below --lease-s (default: a "
        "third of it)",
    )
    parser.add_argument("--max-attempts", type=int, default=StoreSettings().max_attempts)
    parser.add_argument("--batch", type=int, default=StoreSettings().batch_per_tenant)
    parser.add_argument("--poll-s", type=float, default=1.0)
    parser.add_argument("--until-idle", action="store_true", help="exit when no work is left")
    return parser


async def _main(args: argparse.Namespace) -> WorkerSummary:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await run_worker(
        args.dsn,
        worker_id=args.worker_id,
        schema=args.schema,
        settings=args.settings,
        until_idle=args.until_idle,
        poll_s=args.poll_s,
        stop=stop,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the worker, print its summary as one JSON line (deprecated)."""
    # Not warnings.warn: a DeprecationWarning is hidden by default, and the operator running
    # this command is the one who must hear it.
    sys.stderr.write(DEPRECATION_NOTICE)
    sys.stderr.flush()
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn or ESRA_STORE_DSN is required")
    try:
        args.settings = StoreSettings(
            lease_s=args.lease_s,
            heartbeat_s=args.heartbeat_s,
            max_attempts=args.max_attempts,
            batch_per_tenant=args.batch,
        )
    except ValueError as exc:
        parser.error(
            str(exc).replace("lease_s", "--lease-s").replace("heartbeat_s", "--heartbeat-s")
        )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    summary = asyncio.run(_main(args))
    sys.stdout.write(json.dumps(attrs.asdict(summary)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
