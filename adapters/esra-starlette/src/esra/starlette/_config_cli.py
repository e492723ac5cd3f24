"""``esra config export`` and ``esra config import``: configuration as code, through the chain.

``export`` writes one tenant's published configuration (or, with ``--draft``, its current
draft) as the configuration document's JSON — the core converter's output, keys and sets
sorted, so a file diffs cleanly in git review. A configuration only ever holds secret
*references*; no secret value is ever exported. Export reads the configuration database
directly, so it is for whoever holds that database's credentials.

``import`` reads such a document (``.json`` or ``.toml``) and applies it through the
triple-control chain's own services — the same role checks, audit records and versioning
as the admin API. The caller proves its roles with one or more bearer tokens (``--token``,
repeatable, or ``$ESRA_TOKEN``), verified exactly as the host verifies them (the settings'
trusted issuers, or the embedded default's development issuer): each step runs as the first
token whose roles permit it, so importing a whole configuration takes the same distinct role
holders the API does. Sources (with their mappings) and capabilities need
``ESRA_DATA_MANAGE``, access policies ``GOVERNANCE_MANAGE``, exposures and ``--publish``
``ESRA_EXPOSURE_MANAGE``; connection secrets must already exist (``SECURITY_MANAGE`` writes
them through the API). Import adds or replaces objects by id and never removes one. Each
step names the version the previous one produced, so an edit made by someone else during
the import stops it with a conflict rather than being overwritten.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from esra.core.admin import Administrator, Role, WorkspaceStore
    from esra.core.config import ConfigSnapshot

__all__ = ["CONFIG_DATABASE_FILE", "TOKEN_VARIABLE", "register"]

# The embedded default's configuration database, in its data directory: its state database,
# shared with the secret table and the audit log (``esra.starlette._durable_state``).
CONFIG_DATABASE_FILE = "state.db"
TOKEN_VARIABLE = "ESRA_TOKEN"
EXIT_FAILED = 1
EXIT_USAGE = 2


class _ImportError(Exception):
    """The import cannot proceed; the message is for the operator."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``esra config export`` and ``esra config import`` to ``commands``."""
    config = commands.add_parser(
        "config",
        help="export or import a tenant's configuration (configuration as code)",
        description="Export a tenant's configuration as JSON, or import one through the "
        "admin chain's role checks.",
    )
    actions = config.add_subparsers(dest="config_command", required=True)

    export = actions.add_parser("export", help="write a tenant's configuration as JSON")
    export.add_argument("--tenant", required=True, help="the tenant to export")
    export.add_argument(
        "--draft", action="store_true", help="export the current draft, not the publication"
    )
    export.add_argument(
        "--output", type=Path, default=None, help="the file to write (default: stdout)"
    )
    export.add_argument(
        "--config", type=Path, default=None, help="the host's TOML settings (its [state])"
    )
    _add_database(export)
    export.set_defaults(run=_export)

    imported = actions.add_parser(
        "import", help="apply a configuration document through the admin chain"
    )
    imported.add_argument("file", type=Path, help="a configuration document (.json or .toml)")
    imported.add_argument(
        "--token",
        action="append",
        default=[],
        help=f"a bearer token proving the caller's roles (repeatable; default: ${TOKEN_VARIABLE})",
    )
    imported.add_argument(
        "--config", type=Path, default=None, help="the host's TOML settings (its issuers)"
    )
    imported.add_argument(
        "--publish",
        action="store_true",
        help="publish every exposure the document marks published (default: leave drafts)",
    )
    imported.add_argument("--reason", default=None, help="why: recorded with every change")
    imported.add_argument(
        "--if-version",
        type=int,
        default=None,
        help="apply only if the draft is still at this version",
    )
    _add_database(imported)
    imported.set_defaults(run=_import)


def _add_database(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--database",
        default=None,
        help="the configuration database: an SQLite file or a postgresql:// DSN "
        f"(default: --config's [state] database, else {CONFIG_DATABASE_FILE} in the data "
        "directory)",
    )
    command.add_argument(
        "--schema", default=None, help="the PostgreSQL configuration schema (default esra_config)"
    )
    command.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the embedded default's data directory (default: $ESRA_HOME or ~/.esra)",
    )


def _fail(message: str, status: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"esra: config: {message}\n")
    return status


def _data_dir(args: argparse.Namespace) -> Path:
    from esra.starlette._data_dir import default_data_dir  # noqa: PLC0415

    data_dir: Path = args.data_dir or default_data_dir()
    return data_dir


def _configured_database(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The ``[state] database`` and configuration schema of ``--config``, if it names one."""
    if getattr(args, "config", None) is None:
        return None, None
    from esra.starlette._settings import SettingsError, load_settings  # noqa: PLC0415

    try:
        state = load_settings(args.config, model_key=False).state
    except SettingsError as exc:
        raise _ImportError(f"{args.config}: {exc}") from None
    return state.database, state.config_schema


async def _open_store(args: argparse.Namespace) -> WorkspaceStore:
    database, schema = args.database, args.schema
    if database is None:
        database, configured_schema = _configured_database(args)
        schema = schema or configured_schema
    if database is not None and database.startswith(("postgresql://", "postgres://")):
        from esra.postgres import DEFAULT_CONFIG_SCHEMA, PostgresConfigStore  # noqa: PLC0415
        from esra.starlette._durable_state import postgres_connect_kwargs  # noqa: PLC0415

        # A template's ${secret:env:NAME} / ${secret:file:/path} password, as the host does.
        kwargs = await postgres_connect_kwargs(database)
        return await PostgresConfigStore.open(
            kwargs=kwargs, schema=schema or DEFAULT_CONFIG_SCHEMA, min_size=1, max_size=2
        )
    from esra.sqlite import SqliteConfigStore  # noqa: PLC0415

    if database is None:
        data_dir = _data_dir(args)
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return SqliteConfigStore(data_dir / CONFIG_DATABASE_FILE)
    return SqliteConfigStore(Path(database))


async def _close(store: WorkspaceStore) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        await close()


# -- export ------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    from esra.core.config import dump_snapshot  # noqa: PLC0415
    from esra.core.exceptions import ConfigurationError  # noqa: PLC0415

    async def read() -> ConfigSnapshot | None:
        store = await _open_store(args)
        try:
            if args.draft:
                workspace = await store.load(args.tenant)
                return workspace.snapshot if workspace is not None else None
            return await store.published(args.tenant)
        finally:
            await _close(store)

    try:
        snapshot = asyncio.run(read())
    except _ImportError as exc:
        return _fail(f"export: {exc}")
    except ConfigurationError as exc:
        return _fail(f"export: {exc}", EXIT_FAILED)
    if snapshot is None:
        what = "draft" if args.draft else "published configuration"
        return _fail(f"tenant {args.tenant!r} has no {what}", EXIT_FAILED)
    text = json.dumps(dump_snapshot(snapshot), indent=2, sort_keys=True, ensure_ascii=False)
    if args.output is None:
        sys.stdout.write(text + "\n")
    else:
        args.output.write_text(text + "\n", encoding="utf-8")
    return 0


# -- import ------------------------------------------------------------------------------


def _document(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        msg = f"{path}: cannot read a configuration document ({type(exc).__name__})"
        raise _ImportError(msg) from None
    if not isinstance(data, dict):
        raise _ImportError(f"{path}: a configuration document is a JSON object")
    return data


def _administrators(args: argparse.Namespace) -> tuple[str, list[Administrator]]:
    from esra.core.admin import Administrator, Grant, Role  # noqa: PLC0415
    from esra.starlette._admin.operator import DEFAULT_ROLES_CLAIM, roles_of  # noqa: PLC0415
    from esra.starlette._auth import JwtVerifier, TokenRejectedError  # noqa: PLC0415

    tokens = list(args.token) or [t for t in (os.environ.get(TOKEN_VARIABLE),) if t]
    if not tokens:
        raise _ImportError(f"give --token (or set ${TOKEN_VARIABLE}): import checks roles")
    verifier = JwtVerifier(_issuers(args))
    administrators = []
    tenants = set()
    for index, token in enumerate(tokens, start=1):
        try:
            caller = verifier.authenticate(token)
        except TokenRejectedError as exc:
            raise _ImportError(f"token {index} is refused ({exc.reason.value})") from None
        tenants.add(caller.tenant_id)
        grants = (Grant(Role(n), caller.tenant_id) for n in roles_of(caller, DEFAULT_ROLES_CLAIM))
        administrators.append(Administrator.of(caller.subject, *grants))
    if len(tenants) != 1:
        raise _ImportError("every token must belong to the same tenant")
    return tenants.pop(), administrators


def _issuers(args: argparse.Namespace) -> list[Any]:
    if args.config is not None:
        from esra.starlette._settings import SettingsError, load_settings  # noqa: PLC0415

        try:
            return list(load_settings(args.config, model_key=False).issuers)
        except SettingsError as exc:
            raise _ImportError(f"{args.config}: {exc}") from None
    from esra.starlette._devtoken import DevIssuerError, load_or_create_dev_issuer  # noqa: PLC0415
    from esra.starlette._embedded import EMBEDDED_TENANT  # noqa: PLC0415

    try:
        issuer = load_or_create_dev_issuer(_data_dir(args))
    except DevIssuerError as exc:
        raise _ImportError(str(exc)) from None
    return [issuer.trusted(frozenset({EMBEDDED_TENANT}))]


def _holder(admins: Sequence[Administrator], role: Role, tenant_id: str) -> Administrator:
    # The first token permitted for the step; else the first, whose denial is audited.
    return next((a for a in admins if a.may(role, tenant_id)), admins[0])


async def _apply(
    args: argparse.Namespace, snapshot: ConfigSnapshot, admins: Sequence[Administrator]
) -> int:
    import attrs  # noqa: PLC0415

    from esra.core import SystemClock  # noqa: PLC0415
    from esra.core.admin import AccessPolicyService, DataModelService, ExposureService, Role  # noqa: PLC0415
    from esra.core.audit import LoggingAuditSink  # noqa: PLC0415
    from esra.core.hosting import DurableConfigRepository  # noqa: PLC0415

    tenant = snapshot.tenant_id
    store = await _open_store(args)
    try:
        audit, clock = LoggingAuditSink(), SystemClock()
        model = DataModelService(store, audit=audit, clock=clock)
        policies = AccessPolicyService(store, audit=audit, clock=clock)
        exposures = ExposureService(store, DurableConfigRepository(store), audit=audit, clock=clock)
        current = await store.load(tenant)
        version = current.version if current is not None else 0
        if args.if_version is not None and args.if_version != version:
            return _fail(f"the draft is at version {version}, not {args.if_version}", 1)
        reason = args.reason
        data = _holder(admins, Role.ESRA_DATA_MANAGE, tenant)
        governance = _holder(admins, Role.GOVERNANCE_MANAGE, tenant)
        exposure_manager = _holder(admins, Role.ESRA_EXPOSURE_MANAGE, tenant)
        for source in snapshot.sources:
            workspace = await model.model_source(
                data,
                tenant,
                source,
                snapshot.mappings_of(source.id),
                expected_version=version,
                reason=reason,
            )
            version = workspace.version
        for capability in snapshot.capabilities:
            workspace = await model.define_capability(
                data, tenant, capability, expected_version=version, reason=reason
            )
            version = workspace.version
        for policy in snapshot.access_policies:
            workspace = await policies.author_policy(
                governance, tenant, policy, expected_version=version, reason=reason
            )
            version = workspace.version
        for exposure in snapshot.exposures:
            workspace = await exposures.bind_exposure(
                exposure_manager,
                tenant,
                attrs.evolve(exposure, published=False),
                expected_version=version,
                reason=reason,
            )
            version = workspace.version
        if args.publish:
            for exposure in snapshot.exposures:
                if exposure.published:
                    workspace = await exposures.publish(
                        exposure_manager,
                        tenant,
                        exposure.slug,
                        expected_version=version,
                        reason=reason,
                    )
                    version = workspace.version
    finally:
        await _close(store)
    state = "published" if args.publish else "left as a draft"
    sys.stdout.write(f"imported into tenant {tenant!r}: now at version {version}, {state}\n")
    return 0


def _import(args: argparse.Namespace) -> int:
    from esra.core.admin import ConfigConflictError, NotPermittedError  # noqa: PLC0415
    from esra.core.config import load_snapshot  # noqa: PLC0415
    from esra.core.exceptions import ConfigurationError  # noqa: PLC0415

    try:
        tenant, admins = _administrators(args)
        document = _document(args.file)
        # A document may leave out its tenant, as an API body may: it is the tokens'.
        document.setdefault("tenant_id", tenant)
        snapshot = load_snapshot(document)
    except _ImportError as exc:
        return _fail(f"import: {exc}")
    except ConfigurationError as exc:
        return _fail(f"import: {args.file}: {exc}")
    try:
        return asyncio.run(_apply(args, snapshot, admins))
    except NotPermittedError:
        return _fail("import: the tokens' roles do not permit a step (it is audited)", 1)
    except ConfigConflictError as exc:
        return _fail(f"import: conflict: {exc}", 1)
    except _ImportError as exc:
        return _fail(f"import: {exc}")
    except ConfigurationError as exc:
        return _fail(f"import: refused: {exc}", 1)
