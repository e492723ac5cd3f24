"""``esra audit`` and ``esra audit-prune``: read one tenant's audit records back; retention.

``esra audit --tenant T [--sqlite PATH | --jsonl PATH | --postgres DSN] [filters]`` prints
the tenant's records newest first, one JSON object a line, on stdout. One page of
``--limit`` records by default; when more remain, the next page's cursor goes to stderr
(``--cursor`` continues from it) — or ``--all`` follows every page. Filters: ``--event``
(repeatable), ``--subject``, ``--since``/``--until`` (ISO-8601 with an offset; since is
inclusive, until exclusive) and ``--correlation-id``. Without a location it reads where
the host writes: ``--config``'s ``[audit]`` (its state database or JSON-lines file), else
the embedded default's ``state.db`` in ``--data-dir`` (``$ESRA_HOME`` or ``~/.esra``).

``esra audit-prune --before DATE (--sqlite PATH | --postgres DSN)`` deletes every tenant's
records stamped before DATE and prints how many. On PostgreSQL run it with the owner's
(maintenance) DSN: the host's role is refused by the server. Prefer libpq's environment
(``PGPASSWORD``, ``~/.pgpass``) to a password in the DSN, which ``ps`` would show.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

from esra.core.audit import (
    DEFAULT_AUDIT_LIMIT,
    AuditCursor,
    AuditQuery,
    AuditReader,
    record_document,
)
from esra.core.exceptions import EsraError

__all__ = ["register"]

_EXIT_FAILED = 1
_EXIT_USAGE = 2


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        msg = f"not an ISO-8601 time: {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if moment.tzinfo is None:
        msg = f"give a UTC offset, e.g. {text}Z or {text}+02:00"
        raise argparse.ArgumentTypeError(msg)
    return moment


def _add_location(command: argparse.ArgumentParser, *, jsonl: bool) -> None:
    where = command.add_mutually_exclusive_group(required=not jsonl)
    where.add_argument("--sqlite", type=Path, metavar="PATH", help="an SQLite audit database")
    if jsonl:
        where.add_argument("--jsonl", type=Path, metavar="PATH", help="a JSON-lines audit file")
    where.add_argument("--postgres", metavar="DSN", help="a PostgreSQL connection string")
    command.add_argument(
        "--schema", default=None, help="the PostgreSQL audit schema (default: esra_audit)"
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``audit`` and ``audit-prune`` to the ``esra`` command line."""
    audit = commands.add_parser(
        "audit",
        help="print one tenant's audit records as JSON lines, newest first",
        description="Read audit records back from the host's audit store.",
    )
    _add_location(audit, jsonl=True)
    audit.add_argument(
        "--config", type=Path, default=None, help="the host's TOML settings (its [audit])"
    )
    audit.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the embedded default's data directory (default: $ESRA_HOME or ~/.esra)",
    )
    audit.add_argument("--tenant", required=True, help="the tenant whose records to read")
    audit.add_argument("--event", action="append", default=[], help="an event (repeatable)")
    audit.add_argument("--subject", default=None, help="who acted")
    audit.add_argument("--since", type=_moment, default=None, help="inclusive ISO-8601 time")
    audit.add_argument("--until", type=_moment, default=None, help="exclusive ISO-8601 time")
    audit.add_argument("--correlation-id", default=None, help="one invocation's records")
    audit.add_argument("--limit", type=int, default=DEFAULT_AUDIT_LIMIT, help="page size")
    audit.add_argument("--cursor", default=None, help="continue after a previous page")
    audit.add_argument("--all", action="store_true", help="follow every page")
    audit.set_defaults(run=_read)

    prune = commands.add_parser(
        "audit-prune",
        help="retention: delete audit records older than a date (owner's connection)",
        description="Delete every tenant's audit records stamped before --before.",
    )
    _add_location(prune, jsonl=False)
    prune.add_argument("--before", type=_moment, required=True, help="ISO-8601 cutoff")
    prune.set_defaults(run=_prune)


def _host_location(args: argparse.Namespace) -> None:
    """Point ``args`` at where the host writes when no location is given."""
    if args.config is None:
        from esra.starlette._data_dir import default_data_dir  # noqa: PLC0415
        from esra.starlette._durable_state import STATE_DATABASE_FILE  # noqa: PLC0415

        args.sqlite = (args.data_dir or default_data_dir()) / STATE_DATABASE_FILE
        return
    from esra.starlette._settings import load_settings  # noqa: PLC0415

    state = load_settings(args.config, model_key=False).state
    if state.audit_kind == "jsonl":
        args.jsonl = state.audit_path
    elif state.audit_kind == "database" and state.on_postgres:
        args.postgres, args.schema = state.database, args.schema or state.audit_schema
    elif state.audit_kind == "database" and state.database is not None:
        args.sqlite = Path(state.database)
    else:
        msg = f"{args.config}: its audit records go to the log only ([audit] kind = 'logging')"
        raise RuntimeError(msg)


@contextlib.asynccontextmanager
async def _reader(args: argparse.Namespace) -> AsyncIterator[Any]:
    if args.sqlite is None and args.jsonl is None and args.postgres is None:
        _host_location(args)
    if getattr(args, "jsonl", None) is not None:
        from esra.core.audit import JsonLinesAuditLog  # noqa: PLC0415

        yield JsonLinesAuditLog(args.jsonl)
    elif args.sqlite is not None:
        from esra.sqlite import SqliteAuditLog  # noqa: PLC0415

        if not args.sqlite.exists():
            msg = f"no such database: {args.sqlite}"
            raise FileNotFoundError(msg)
        log = SqliteAuditLog(args.sqlite)
        try:
            await log.initialize()
            yield log
        finally:
            await log.close()
    else:
        from esra.postgres import DEFAULT_AUDIT_SCHEMA, PostgresAuditLog  # noqa: PLC0415
        from esra.starlette._durable_state import postgres_connect_kwargs  # noqa: PLC0415

        # A template's ${secret:env:NAME} password resolves as the host resolves it.
        kwargs = await postgres_connect_kwargs(args.postgres) if "${" in args.postgres else None
        pg = await PostgresAuditLog.open(
            "" if kwargs else args.postgres,
            kwargs=kwargs,
            schema=args.schema or DEFAULT_AUDIT_SCHEMA,
        )
        try:
            yield pg
        finally:
            await pg.close()


async def _read_pages(args: argparse.Namespace) -> int:
    cursor = AuditCursor.decode(args.cursor) if args.cursor else None
    async with _reader(args) as reader:
        typed: AuditReader = reader
        while True:
            query = AuditQuery(
                tenant_id=args.tenant,
                events=frozenset(args.event),
                subject=args.subject,
                since=args.since,
                until=args.until,
                correlation_id=args.correlation_id,
                limit=args.limit,
                cursor=cursor,
            )
            page = await typed.query(query)
            for record in page.records:
                sys.stdout.write(json.dumps(record_document(record), sort_keys=True) + "\n")
            if page.next_cursor is None:
                return 0
            if not args.all:
                sys.stderr.write(f"more records: --cursor {page.next_cursor.encode()}\n")
                return 0
            cursor = page.next_cursor


def _read(args: argparse.Namespace) -> int:
    from esra.starlette._settings import SettingsError  # noqa: PLC0415

    try:
        return asyncio.run(_read_pages(args))
    except SettingsError as exc:
        sys.stderr.write(f"esra: audit: {args.config}: {exc}\n")
        return _EXIT_USAGE
    except EsraError as exc:
        sys.stderr.write(f"esra: audit: {exc}\n")
        return _EXIT_USAGE
    except (OSError, RuntimeError) as exc:
        sys.stderr.write(f"esra: audit: {exc}\n")
        return _EXIT_FAILED
    except Exception as exc:  # a driver's failure: its class only, never its text
        sys.stderr.write(f"esra: audit: the audit store could not be read ({type(exc).__name__})\n")
        return _EXIT_FAILED


async def _prune_now(args: argparse.Namespace) -> int:
    if args.sqlite is not None:
        from esra.sqlite import SqliteAuditLog  # noqa: PLC0415

        log = SqliteAuditLog(args.sqlite)
        try:
            await log.initialize()
            return await log.prune_before(args.before)
        finally:
            await log.close()
    import psycopg  # noqa: PLC0415

    from esra.postgres import DEFAULT_AUDIT_SCHEMA, prune_audit_before  # noqa: PLC0415

    async with await psycopg.AsyncConnection.connect(args.postgres, autocommit=True) as conn:
        return await prune_audit_before(conn, args.before, args.schema or DEFAULT_AUDIT_SCHEMA)


def _prune(args: argparse.Namespace) -> int:
    try:
        removed = asyncio.run(_prune_now(args))
    except Exception as exc:  # a refused role, an unreachable server: the class, not the text
        sys.stderr.write(f"esra: audit-prune: not pruned ({type(exc).__name__})\n")
        return _EXIT_FAILED
    sys.stdout.write(f"{removed}\n")
    return 0
