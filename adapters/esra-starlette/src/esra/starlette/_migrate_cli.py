"""``esra migrate``: an owner applies the host's PostgreSQL state schemas and grants its role.

``esra migrate --config settings.toml [--owner-database TEMPLATE] [--grant-to ROLE]``
applies, idempotently and each in one transaction, the configuration, secret and — when
``[audit] kind = "database"`` — audit schemas the settings' ``[state]`` names, on the
``[state] database`` or on ``--owner-database`` (the same server, connected as the owner:
a connection template whose password is a ``${secret:env:NAME}`` or ``${secret:file:/path}``
reference). With ``--grant-to`` it then grants the host's role exactly what it uses
(``esra.postgres.grant_state_host_role``), so the host can run with
``apply_schemas = false`` and own nothing: the server then refuses it any change to the
audit it wrote, and any DDL in the state schemas. It prints one line per schema.

Exit status: 0 when every schema is at its version (and the grants were made), 1 when the
database refused (the message names the schema), 2 for a usage error (no ``[state]
database``, an SQLite one — the host applies an SQLite state database's schema itself — or a
role name that is not a plain lowercase identifier).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["register"]

_EXIT_FAILED = 1
_EXIT_USAGE = 2
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``esra migrate`` to the command line."""
    migrate = commands.add_parser(
        "migrate",
        help="apply the PostgreSQL state schemas as their owner (for apply_schemas = false)",
        description="Apply the configuration, secret and audit schemas of the settings' "
        "[state] database, idempotently, and optionally grant the host's role what it uses.",
    )
    migrate.add_argument("--config", type=Path, required=True, help="the host's TOML settings")
    migrate.add_argument(
        "--owner-database",
        default=None,
        metavar="TEMPLATE",
        help="connect as the schemas' owner instead of [state] database (a postgresql:// "
        "template; its password a ${secret:env:NAME} or ${secret:file:/path} reference)",
    )
    migrate.add_argument(
        "--grant-to",
        default=None,
        metavar="ROLE",
        help="the host's database role: grant it what the host uses, and nothing more",
    )
    migrate.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from esra.core.exceptions import EsraError  # noqa: PLC0415
    from esra.starlette._settings import SettingsError, load_settings  # noqa: PLC0415

    try:
        settings = load_settings(args.config, model_key=False)
    except SettingsError as exc:
        sys.stderr.write(f"esra migrate: {exc}\n")
        return _EXIT_USAGE
    state = settings.state
    if state.database is None:
        sys.stderr.write("esra migrate: the settings name no [state] database\n")
        return _EXIT_USAGE
    if not state.on_postgres:
        sys.stderr.write(
            "esra migrate: an SQLite state database's schema is applied by the host that "
            "opens it; nothing to migrate\n"
        )
        return _EXIT_USAGE
    if args.grant_to is not None and not _ROLE.fullmatch(args.grant_to):
        sys.stderr.write("esra migrate: --grant-to must be a plain lowercase role name\n")
        return _EXIT_USAGE
    try:
        return asyncio.run(_migrate(args.owner_database or state.database, state, args.grant_to))
    except EsraError as exc:
        sys.stderr.write(f"esra migrate: {exc}\n")
        return _EXIT_USAGE


async def _migrate(template: str, state: Any, grant_to: str | None) -> int:
    import psycopg  # noqa: PLC0415

    from esra.postgres import (  # noqa: PLC0415
        AUDIT_SCHEMA_VERSION,
        CONFIG_SCHEMA_VERSION,
        SECRET_SCHEMA_VERSION,
        apply_audit_schema,
        apply_config_schema,
        apply_secret_schema,
        grant_state_host_role,
    )
    from esra.starlette._durable_state import postgres_connect_kwargs  # noqa: PLC0415

    audit_schema = state.audit_schema if state.audit_kind == "database" else None
    plan: list[tuple[str, int, Callable[[Any, str], Awaitable[bool]]]] = [
        (state.config_schema, CONFIG_SCHEMA_VERSION, apply_config_schema),
        (state.secrets_schema, SECRET_SCHEMA_VERSION, apply_secret_schema),
    ]
    if audit_schema is not None:
        plan.append((audit_schema, AUDIT_SCHEMA_VERSION, apply_audit_schema))
    kwargs = await postgres_connect_kwargs(template)
    kwargs["application_name"] = "esra-migrate"
    try:
        connection = await psycopg.AsyncConnection.connect(**kwargs)
    except psycopg.Error as exc:
        # An unreachable server or a refused login: the class only, as for a refused
        # schema below — the driver's text may quote the connection's parameters.
        sys.stderr.write(f"esra migrate: cannot connect ({type(exc).__name__})\n")
        return _EXIT_FAILED
    async with connection as conn:
        for schema, version, apply in plan:
            try:
                applied = await apply(conn, schema)
            except psycopg.Error as exc:
                sys.stderr.write(f"esra migrate: {schema}: refused ({type(exc).__name__})\n")
                return _EXIT_FAILED
            done = "applied" if applied else "already at"
            sys.stdout.write(f"{schema}: {done} version {version}\n")
        if grant_to is not None:
            try:
                await grant_state_host_role(
                    conn,
                    grant_to,
                    config_schema=state.config_schema,
                    secrets_schema=state.secrets_schema,
                    audit_schema=audit_schema,
                )
            except psycopg.Error as exc:
                sys.stderr.write(
                    f"esra migrate: granting {grant_to} refused ({type(exc).__name__})\n"
                )
                return _EXIT_FAILED
            sys.stdout.write(f"granted {grant_to} what the host uses\n")
    return 0
