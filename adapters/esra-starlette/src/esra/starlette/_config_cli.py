"""``esra config export`` and ``esra config import``: configuration as code, through the chain.

``export`` writes one tenant's published configuration (or, with ``--draft``, its current
draft) as the configuration document's JSON — the core converter's output, keys and sets
sorted, so a file diffs cleanly in git review. A configuration only ever holds secret
*references*; no secret value is ever exported. Export reads the configuration database
directly, so it is for whoever holds that database's credentials.

``import`` reads such a document (``.json`` or ``.toml``) and applies it through the
triple-control chain's own services — the same role checks, audit records and versioning
as the admin API. Its records, denials included, go to the host's own audit store (opened
from ``[state]``/``[audit]`` as the host opens it, or the embedded default's ``state.db``) and
are written before the command exits; an audit store that cannot be opened refuses the whole
import before anything is applied. The caller proves its roles with one or more bearer
tokens (``--token``, repeatable, or ``$ESRA_TOKEN``), verified exactly as the host verifies
them (the settings' trusted issuers, or the embedded default's development issuer): each
step runs as the first token whose roles permit it, so importing a whole configuration
takes the same distinct role holders the API does. Sources (with their mappings) and
capabilities need ``ESRA_DATA_MANAGE``, access policies ``GOVERNANCE_MANAGE``, exposures
and ``--publish`` ``ESRA_EXPOSURE_MANAGE``; connection secrets must already exist
(``SECURITY_MANAGE`` writes them through the API). Where the host's secret store can be
opened from the same settings (its keyring is at hand), each stored secret a source names
must be stored in it, as the admin API requires; otherwise only the workspace's record of
its write is checked, and the command says so on stderr. Import adds or replaces objects by id and
never removes one. Each step names the version the previous one produced, so an edit made by
someone else during the import stops it with a conflict rather than being overwritten.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from esra.core.admin import Administrator, Role, WorkspaceStore
    from esra.core.config import ConfigSnapshot
    from esra.core.ports import Clock
    from esra.starlette._durable_state import DurableState
    from esra.starlette._settings import StateSettings

__all__ = ["CONFIG_DATABASE_FILE", "TOKEN_VARIABLE", "register"]

# The embedded default's configuration database, in its data directory: its state database,
# shared with the secret table and the audit log (``esra.starlette._durable_state``).
CONFIG_DATABASE_FILE = "state.db"
TOKEN_VARIABLE = "ESRA_TOKEN"
EXIT_FAILED = 1
EXIT_USAGE = 2

_log = logging.getLogger(__name__)


class _ImportError(Exception):
    """The import cannot proceed; the message is for the operator."""


class _StateUnavailableError(Exception):
    """The host's configuration database or audit store cannot be opened: the import applies
    nothing it could not audit. The message names no secret."""


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


def _host_state(args: argparse.Namespace) -> StateSettings:
    """Where the host keeps its configuration and its audit log: ``--config``'s ``[state]``
    and ``[audit]``, else the embedded default's ``state.db``; ``--database`` / ``--schema``
    name the configuration database instead (its audit log then lives there too, as on a
    host whose state database it is)."""
    from esra.starlette._durable_state import embedded_state  # noqa: PLC0415

    if args.config is not None:
        from esra.starlette._settings import SettingsError, load_settings  # noqa: PLC0415

        try:
            state = load_settings(args.config, model_key=False).state
        except SettingsError as exc:
            raise _ImportError(f"{args.config}: {exc}") from None
    else:
        from esra.starlette._data_dir import prepare_data_dir  # noqa: PLC0415

        if args.database is None:
            try:  # the embedded default's databases, owner-only as the host creates them
                prepare_data_dir(_data_dir(args))
            except OSError as exc:
                raise _StateUnavailableError(type(exc).__name__) from None
        state = embedded_state(_data_dir(args))
    # Settings without a [state] database keep drafts in the host's memory; the import then
    # writes to the embedded default's database, as it always has.
    database = args.database or state.database or str(_data_dir(args) / CONFIG_DATABASE_FILE)
    return attrs.evolve(state, database=database, config_schema=args.schema or state.config_schema)


async def _open_store(args: argparse.Namespace) -> WorkspaceStore:
    state = _host_state(args)
    assert state.database is not None  # _host_state always names one
    if state.on_postgres:
        from esra.postgres import PostgresConfigStore  # noqa: PLC0415
        from esra.starlette._durable_state import postgres_connect_kwargs  # noqa: PLC0415

        # A template's ${secret:env:NAME} / ${secret:file:/path} password, as the host does.
        kwargs = await postgres_connect_kwargs(state.database)
        return await PostgresConfigStore.open(
            kwargs=kwargs, schema=state.config_schema, min_size=1, max_size=2
        )
    from esra.sqlite import SqliteConfigStore  # noqa: PLC0415

    path = Path(state.database)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return SqliteConfigStore(path)


@attrs.frozen
class _ChainState:
    """What the import applies through: the host's state, and whether ``durable.secrets`` is
    the host's own secret store (so the secrets a source names can be checked as stored)."""

    durable: DurableState
    secrets_checked: bool


async def _open_chain_state(
    stack: contextlib.AsyncExitStack, args: argparse.Namespace, clock: Clock
) -> _ChainState:
    """The host's configuration store, audit sink and — where its keyring is at hand — its
    secret store, opened as the host opens them, on ``stack`` (whose exit flushes the audit
    records and closes them all).

    Raises:
        _StateUnavailableError: the configuration store or audit sink cannot be opened;
            nothing has been applied.
    """
    from esra.core.admin import InMemorySecretVault  # noqa: PLC0415
    from esra.core.exceptions import ConfigurationError  # noqa: PLC0415
    from esra.starlette._durable_state import open_state  # noqa: PLC0415

    # Each step waits for its record, so a step whose record cannot be written is the last
    # one applied — whatever the host's own [audit] wait_for_write says.
    state = attrs.evolve(_host_state(args), wait_for_write=True)
    try:
        # The secret store is opened only to ask whether the secrets a source names are
        # stored (the admin API asks the same); the import never reads a value out.
        with_secrets = contextlib.AsyncExitStack()
        try:
            durable = await open_state(with_secrets, state, policies={}, clock=clock)
        except Exception as exc:  # no keyring here, or no access to the secret table
            await with_secrets.aclose()
            _log.warning(
                "the host's secret store cannot be opened here (%s): the connection secrets "
                "the sources name are not checked as stored",
                type(exc).__name__,
            )
            durable = await open_state(
                stack, state, policies={}, clock=clock, secrets=InMemorySecretVault()
            )
            checked = False
        else:
            stack.push_async_callback(with_secrets.aclose)
            checked = True
        # The host's readiness check of its audit store: a backend that can tell it is
        # unusable says so now, before the first change.
        ping = getattr(durable.audit, "ping", None)
        if callable(ping):
            await ping()
    except ConfigurationError as exc:  # its message names the setting, never a secret
        raise _StateUnavailableError(str(exc)) from None
    except Exception as exc:  # a driver's failure: its class only, its text may name the DSN
        raise _StateUnavailableError(type(exc).__name__) from None
    return _ChainState(durable=durable, secrets_checked=checked)


async def _close(store: WorkspaceStore) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        await close()


# -- export ------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    from esra.core.config import dump_snapshot  # noqa: PLC0415
    from esra.core.exceptions import ConfigurationError  # noqa: PLC0415

    async def read() -> ConfigSnapshot | None:
        try:
            store = await _open_store(args)
        except (_ImportError, _StateUnavailableError, ConfigurationError):
            raise
        except Exception as exc:  # a driver's failure or a path that cannot be made:
            # its class only, as import says it — a driver's text may name the DSN.
            raise _StateUnavailableError(type(exc).__name__) from None
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
    except _StateUnavailableError as exc:
        return _fail(f"export: cannot open the configuration database ({exc})", EXIT_FAILED)
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
    except (OSError, ValueError, RecursionError) as exc:  # "[[[…" nests past the decoder
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
    from esra.core import SystemClock  # noqa: PLC0415
    from esra.core.admin import AccessPolicyService, DataModelService, ExposureService, Role  # noqa: PLC0415
    from esra.core.hosting import DurableConfigRepository  # noqa: PLC0415

    tenant = snapshot.tenant_id
    clock = SystemClock()
    # The stack's exit flushes the audit sink before the command reports anything: every
    # record of this import, denials included, is written (or the exit says it is not).
    async with contextlib.AsyncExitStack() as stack:
        opened = await _open_chain_state(stack, args, clock)
        store, audit = opened.durable.workspaces, opened.durable.audit
        assert store is not None  # _host_state always names a database
        secrets = opened.durable.secrets if opened.secrets_checked else None
        model = DataModelService(store, audit=audit, clock=clock, secrets=secrets)
        policies = AccessPolicyService(store, audit=audit, clock=clock)
        exposures = ExposureService(
            store, DurableConfigRepository(store), audit=audit, clock=clock, secrets=secrets
        )
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
    state = "published" if args.publish else "left as a draft"
    sys.stdout.write(f"imported into tenant {tenant!r}: now at version {version}, {state}\n")
    return 0


def _import(args: argparse.Namespace) -> int:
    from esra.core.admin import ConfigConflictError, NotPermittedError  # noqa: PLC0415
    from esra.core.audit import AuditUnavailableError  # noqa: PLC0415
    from esra.core.config import load_snapshot  # noqa: PLC0415
    from esra.core.exceptions import ConfigurationError  # noqa: PLC0415
    from esra.starlette._log_redaction import redact_root_handlers  # noqa: PLC0415

    # A host auditing to its log ([audit] kind = "logging") has the esra.audit log lines as
    # its only audit records: this command's must reach stderr as the host's reach its log,
    # in `esra serve`'s format (whose helper lives in _cli, which imports this module).
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    redact_root_handlers()
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
    except _StateUnavailableError as exc:
        return _fail(
            f"import: cannot open the host's configuration database and audit store ({exc}): "
            "nothing was applied",
            1,
        )
    except AuditUnavailableError:
        return _fail(
            "import: stopped: the audit store stopped accepting records (those not written "
            "are logged to esra.audit.unwritten); nothing after the failing step was applied",
            1,
        )
    except NotPermittedError:
        return _fail("import: the tokens' roles do not permit a step (it is audited)", 1)
    except ConfigConflictError as exc:
        return _fail(f"import: conflict: {exc}", 1)
    except _ImportError as exc:
        return _fail(f"import: {exc}")
    except ConfigurationError as exc:
        return _fail(f"import: refused: {exc}", 1)
