"""The ``esra`` command line: ``demo``, ``serve``, ``dev-token``, ``worker`` and ``ingest``.

Each command imports what it needs when it runs, so ``esra demo`` never loads the web stack.

``esra demo [QUESTION ...]`` runs the embedded demo without a server. ``esra serve`` runs the
MCP endpoint at ``/mcp`` — on the embedded default without ``--config``, on a TOML
configuration with it. ``esra dev-token`` signs a token with the embedded default's
development issuer, so a new user can call ``esra serve`` at once. ``esra worker`` indexes
the documents queued in every tenant's document store; ``esra ingest PATH ...`` uploads files
into one tenant's store and indexes them at once. No command initialises a store implicitly:
``esra ingest`` into the embedded default's store not initialised yet initialises it for the
user as the audited administrative action (``esra.starlette._store_init``) and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from esra.core.docstore import MissingExtraError, require_document_extra
from esra.core.exceptions import ConfigurationError
from esra.starlette._data_dir import default_data_dir
from esra.starlette._event_loop import run_serving

if TYPE_CHECKING:
    from esra.core.docstore import StoreSettings
    from esra.starlette._bootstrap import Runtime
    from esra.starlette._serve import HostServer
    from esra.starlette._settings import HostSettings
    from esra.starlette._warming import StoreWarmer

__all__ = ["build_parser", "configure_serve_logging", "host_server", "main", "run_host_server"]

_T = TypeVar("_T")
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


def _add_data_dir(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the embedded default's data directory (default: $ESRA_HOME or ~/.esra)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``esra`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="esra", description="ESRA: governed enterprise search for AI clients."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="search the embedded Larkspur Cycles demo (SQLite, offline model, no server)",
        description="Run questions through the whole ESRA pipeline over a small fictional "
        "company. Without a question, runs a few examples.",
    )
    demo.add_argument("question", nargs="*", help="the question to ask (words are joined)")
    demo.add_argument(
        "--region",
        action="append",
        default=None,
        help="the caller's region claim for support tickets (repeatable; default: emea)",
    )

    serve = commands.add_parser(
        "serve",
        help="run the MCP endpoint (/mcp) over HTTP",
        description="Serve ESRA's MCP tools over streamable HTTP at /mcp. Without --config, "
        "serves the embedded default: the Larkspur Cycles demo and an empty document store, "
        "trusting tokens from `esra dev-token`.",
    )
    serve.add_argument("--config", type=Path, default=None, help="the host's TOML settings")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="TCP port to listen on")
    serve.add_argument(
        "--insecure-dev-anonymous",
        action="store_true",
        help="for the MCP conformance suite only: serve calls without a token as a fixed "
        "development caller (embedded default on a loopback address only)",
    )
    serve.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        metavar="N",
        help="serve from N processes on one listening socket (default 1). Above 1 only with "
        "--config whose state is all outside the process: [state] database on PostgreSQL, "
        "[redis] with cache, quota and breakers, and [fetch] keys_file",
    )
    _add_data_dir(serve)

    token = commands.add_parser(
        "dev-token",
        help="sign a development token for the embedded default",
        description="Print an access token signed by the embedded default's development "
        "issuer. Only `esra serve` without --config trusts it.",
    )
    token.add_argument("--tenant", required=True, help="the tenant (embedded: larkspur)")
    token.add_argument("--subject", required=True, help="the caller's subject (sub)")
    token.add_argument(
        "--claim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an extra claim; repeat a name for a list (e.g. --claim region=emea)",
    )
    token.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="ROLE",
        help="an administrative role for the admin API and portal, e.g. ESRA_DATA_MANAGE "
        "(repeatable; sets the esra_roles claim)",
    )
    token.add_argument("--client", default=None, help="the client application (azp)")
    token.add_argument("--lifetime", type=int, default=3600, help="seconds until the token expires")
    token.add_argument(
        "--config",
        type=Path,
        default=None,
        help="refused: a configured deployment's tokens come from its identity provider",
    )
    _add_data_dir(token)
    _add_worker(commands)
    _add_ingest(commands)
    from esra.starlette import _audit_cli as audit_cli  # noqa: PLC0415 - each command loads its own imports

    audit_cli.register(commands)
    from esra.starlette import _config_cli as config_cli  # noqa: PLC0415 - each command loads its own imports

    config_cli.register(commands)
    from esra.starlette import _migrate_cli as migrate_cli  # noqa: PLC0415 - each command loads its own imports

    migrate_cli.register(commands)
    from esra.starlette import _explain_cli as explain_cli  # noqa: PLC0415 - each command loads its own imports

    explain_cli.register(commands)
    return parser


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:  # an hour is the longest idle wait worth asking for
        msg = f"must be a number of seconds above 0 and at most 3600, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return seconds


def _worker_count(text: str) -> int:
    from esra.starlette._workers import MAX_WORKERS  # noqa: PLC0415

    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_WORKERS:
        msg = f"must be a whole number from 1 to {MAX_WORKERS}, not {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return count


def _add_worker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="index uploaded documents: the ingestion worker over every tenant's store",
        description="Claim queued documents in every document store the host serves, "
        "extract, scan and index them, and log each turn's tally. Without --config, works on "
        "the embedded default's store. SIGINT or SIGTERM stops it after the document in hand.",
    )
    worker.add_argument("--config", type=Path, default=None, help="the host's TOML settings")
    worker.add_argument(
        "--once",
        "--until-idle",
        dest="once",
        action="store_true",
        help="drain the queues, then exit instead of waiting",
    )
    worker.add_argument(
        "--interval",
        type=_positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="how long to wait when no store has work (default: 5)",
    )
    worker.add_argument(
        "--worker-id", default=None, help="the claims' owner (default: host:pid:random)"
    )
    worker.add_argument(
        "--lease",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="the lease on the document being extracted: a worker that dies is noticed when "
        "it lapses (default: 60)",
    )
    worker.add_argument(
        "--heartbeat",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="how often that lease is renewed while extracting; below --lease "
        "(default: a third of the lease)",
    )
    _add_data_dir(worker)


def _add_ingest(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ingest = commands.add_parser(
        "ingest",
        help="upload files into a tenant's document store and index them",
        description="Upload files (directories recursively, hidden files and symbolic links "
        "inside them skipped) into a "
        "tenant's document store, each inspected like an API upload, then index them so they "
        "are searchable at once. Prints one line per file: outcome, state and remedy. Exit "
        "status 0 when every file was stored and indexed, 1 otherwise, 2 for usage errors. "
        "Without --config, an embedded store not initialised yet is first initialised on your "
        "behalf (audited as esra.store.initialise by cli:<your user>); a configured store "
        "must be initialised by an administrator.",
    )
    ingest.add_argument("path", nargs="+", type=Path, help="a file or directory to ingest")
    ingest.add_argument("--config", type=Path, default=None, help="the host's TOML settings")
    ingest.add_argument("--tenant", default=None, help="the tenant whose store receives the files")
    ingest.add_argument(
        "--scope",
        default=None,
        help="the documents' security scope: callers need it in their document_scopes claim "
        "(default: general)",
    )
    ingest.add_argument(
        "--no-index",
        dest="index",
        action="store_false",
        help="only store the files (pending); `esra worker` indexes them later",
    )
    _add_data_dir(ingest)


def _fail(message: str) -> int:
    sys.stderr.write(f"esra: {message}\n")
    return EXIT_USAGE


def _claims(pairs: Sequence[str]) -> dict[str, str | tuple[str, ...]]:
    from esra.starlette._claim_pairs import MalformedClaimError, parse_claim_pairs  # noqa: PLC0415

    try:
        return parse_claim_pairs(pairs)
    except MalformedClaimError as exc:
        msg = f"--claim {exc}"
        raise ValueError(msg) from None


def _roles(names: Sequence[str]) -> tuple[str, ...]:
    from esra.core.admin import Role  # noqa: PLC0415

    known = {role.value for role in Role}
    unknown = [name for name in names if name not in known]
    if unknown:
        msg = f"--role {unknown[0]!r} is not a role; use one of {', '.join(sorted(known))}"
        raise ValueError(msg)
    return tuple(dict.fromkeys(names))


def _dev_token(args: argparse.Namespace) -> int:
    from esra.starlette._admin.operator import DEFAULT_ROLES_CLAIM  # noqa: PLC0415
    from esra.starlette._devtoken import DevIssuerError, load_or_create_dev_issuer  # noqa: PLC0415
    from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT  # noqa: PLC0415

    if args.config is not None:
        return _fail(
            "dev-token: the development issuer exists only in the embedded default "
            "(esra serve without --config); a configured deployment trusts its own identity "
            "providers, so ask one of them for a token"
        )
    if args.tenant != EMBEDDED_TENANT:
        return _fail(f"dev-token: the embedded default serves tenant {EMBEDDED_TENANT!r} only")
    data_dir = args.data_dir or default_data_dir()
    try:
        claims = _claims(args.claim)
        if args.role:
            claims[DEFAULT_ROLES_CLAIM] = _roles(args.role)
        issuer = load_or_create_dev_issuer(data_dir)
        token = issuer.mint(
            tenant=args.tenant,
            subject=args.subject,
            client_app=args.client or EMBEDDED_CLIENT_APP,
            now=datetime.now(UTC),
            claims=claims,
            lifetime_s=args.lifetime,
        )
    except (ValueError, DevIssuerError) as exc:
        return _fail(f"dev-token: {exc}")
    sys.stdout.write(token + "\n")
    return 0


def host_server(args: argparse.Namespace) -> HostServer:
    """The ``HostServer`` ``esra serve`` runs for parsed ``args``.

    Raises:
        SettingsError: ``--config`` names unusable settings.
        ValueError: ``--insecure-dev-anonymous`` with ``--config`` or a non-loopback host.
    """
    from esra.starlette._anonymous import LOOPBACK_HOSTS, DevAnonymousCaller  # noqa: PLC0415
    from esra.starlette._devtoken import load_or_create_dev_issuer  # noqa: PLC0415
    from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT  # noqa: PLC0415
    from esra.starlette._parts import open_configured, open_embedded  # noqa: PLC0415
    from esra.starlette._serve import HostServer  # noqa: PLC0415
    from esra.starlette._settings import load_settings  # noqa: PLC0415

    anonymous = getattr(args, "insecure_dev_anonymous", False)
    if anonymous and args.config is not None:
        msg = "--insecure-dev-anonymous is for the embedded default only, never with --config"
        raise ValueError(msg)
    if anonymous and args.host not in LOOPBACK_HOSTS:
        msg = "--insecure-dev-anonymous needs a loopback --host (127.0.0.1, localhost or ::1)"
        raise ValueError(msg)
    if args.config is not None:
        settings = load_settings(args.config)
        return HostServer(
            lambda: open_configured(settings),
            host=args.host,
            port=args.port,
            resource_url=settings.server.resource_url,
            telemetry=settings.telemetry,
            settle_heap=True,
        )
    data_dir = args.data_dir or default_data_dir()
    if not anonymous:
        return HostServer(
            lambda: open_embedded(data_dir), host=args.host, port=args.port, settle_heap=True
        )
    issuer = load_or_create_dev_issuer(data_dir)
    return HostServer(
        lambda: open_embedded(data_dir),
        host=args.host,
        port=args.port,
        settle_heap=True,
        wrap=lambda app: DevAnonymousCaller(
            app, issuer, tenant=EMBEDDED_TENANT, client_app=EMBEDDED_CLIENT_APP
        ),
    )


def configure_serve_logging() -> None:
    """The log format of ``esra serve`` (and of each of its workers), credentials redacted."""
    from esra.starlette._log_redaction import redact_root_handlers  # noqa: PLC0415

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    redact_root_handlers()


def run_host_server(serve: Callable[[], None]) -> int:
    """Run ``serve`` (a host server until it stops); its exit status, failures said plainly."""
    try:
        serve()
    except MissingExtraError as exc:
        # A store is configured but pypdf / python-docx are not installed: the install
        # command, not a traceback.
        sys.stderr.write(f"esra: serve: {exc}\n")
        return 1
    except ConfigurationError as exc:
        # Found while composing: a keyring with loose permissions or missing a key in use,
        # a state database whose password reference does not resolve, an uninstalled
        # provider kind. The message names the setting, never a secret.
        sys.stderr.write(f"esra: serve: {exc}\n")
        return 1
    except KeyboardInterrupt:
        # uvicorn shuts down cleanly on Ctrl-C, then re-raises the signal it caught; the
        # conventional exit status says so without a traceback in the log.
        return EXIT_INTERRUPTED
    return 0


def _serve(args: argparse.Namespace) -> int:
    from esra.starlette._embedded import EMBEDDED_TENANT  # noqa: PLC0415
    from esra.starlette._settings import SettingsError  # noqa: PLC0415

    if args.workers > 1:
        return _serve_workers(args)
    try:
        server = host_server(args)
    except SettingsError as exc:
        return _fail(f"serve: {args.config}: {exc}")
    except ValueError as exc:
        return _fail(f"serve: {exc}")
    configure_serve_logging()
    sys.stderr.write(f"ESRA MCP endpoint: {server.resource_url}\n")
    if args.insecure_dev_anonymous:
        sys.stderr.write(
            "INSECURE: calls without a token are served as the development caller "
            "'dev-anonymous' (--insecure-dev-anonymous; for the conformance suite only)\n"
        )
    elif args.config is None:
        sys.stderr.write(
            "Embedded default. Get a token with:\n"
            f"  esra dev-token --tenant {EMBEDDED_TENANT} --subject you --claim region=emea "
            "--claim document_scopes=general\n"
            "Its document store is initialised by your first `esra ingest PATH` (audited) or "
            "at /portal/status.\n"
        )
    # uvicorn re-raises the signal it shut down on. Under SIGTERM's default action that
    # killed the process inside the server, before its parts (audit sink, pools, telemetry
    # export) were closed; this handler is what uvicorn restores and re-raises to, so the
    # stop already under way finishes, the parts close, and the exit status is 0. (Ctrl-C
    # keeps Python's own handler: KeyboardInterrupt unwinds through the parts, exit 130.)
    previous = signal.signal(signal.SIGTERM, lambda number, frame: server.stop())
    try:
        return run_host_server(lambda: run_serving(server.serve))
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve_workers(args: argparse.Namespace) -> int:
    """``esra serve --workers N`` above 1: refused unless no state a caller can observe is
    kept per process, then the port reserved and the supervised workers
    (``esra.starlette._workers``)."""
    from esra.starlette._host import default_resource_url  # noqa: PLC0415
    from esra.starlette._settings import SettingsError, load_settings  # noqa: PLC0415
    from esra.starlette._workers import (  # noqa: PLC0415
        WorkerSupervisor,
        per_process_state,
        reserve_port,
    )

    refused = f"serve: --workers {args.workers} is refused"
    if args.insecure_dev_anonymous:
        return _fail(f"{refused}: --insecure-dev-anonymous serves from one process only")
    settings = None
    if args.config is not None:
        try:
            settings = load_settings(args.config)
        except SettingsError as exc:
            return _fail(f"serve: {args.config}: {exc}")
    reasons = per_process_state(settings)
    if reasons:
        return _fail(
            f"{refused}: a caller would see state that differs between worker processes; "
            + "; ".join(reasons)
            + " (docs/deployment.md, several workers)"
        )
    assert settings is not None  # the embedded default always has a reason
    try:
        reserved = reserve_port(args.host, args.port)
    except OSError as exc:
        sys.stderr.write(f"esra: serve: cannot listen on {args.host}:{args.port}: {exc}\n")
        return 1
    with reserved:
        return WorkerSupervisor(
            config=args.config,
            host=args.host,
            # The port bound, should --port 0 have asked the kernel for one.
            port=reserved.getsockname()[1],
            workers=args.workers,
            reserved=reserved,
            resource_url=settings.server.resource_url or default_resource_url(args.host, args.port),
            err=sys.stderr,
        ).run()


def _settings(args: argparse.Namespace) -> HostSettings | None:
    """The ``--config`` settings, or ``None`` for the embedded default.

    Raises:
        SettingsError: ``--config`` names unusable settings.
    """
    from esra.starlette._settings import load_settings  # noqa: PLC0415

    if args.config is None:
        return None
    # Neither command calls the model, so its key need not be in this environment.
    return load_settings(args.config, model_key=False)


def _stores(args: argparse.Namespace, settings: HostSettings | None) -> frozenset[str]:
    """The tenants with a store the command works on: configured, or the embedded one (the
    stores themselves are composed by ``esra.starlette._bootstrap``).

    Raises:
        OSError: the embedded default's data directory cannot be created.
    """
    from esra.starlette._bootstrap import store_tenants_of  # noqa: PLC0415

    return store_tenants_of(settings, args.data_dir or default_data_dir())


async def _in_runtime(
    args: argparse.Namespace,
    settings: HostSettings | None,
    work: Callable[[Runtime], Awaitable[_T]],
) -> _T:
    """Run ``work`` inside the process's one composition root, composed for the stores."""
    from esra.starlette._bootstrap import Purpose, bootstrap  # noqa: PLC0415

    data_dir = args.data_dir or default_data_dir()
    async with bootstrap(settings, data_dir=data_dir, purpose=Purpose.STORES) as runtime:
        return await work(runtime)


def _warmer(
    settings: HostSettings | None,
) -> contextlib.AbstractContextManager[StoreWarmer | None]:
    """What warms the embedding cache after indexing, when ``[model]`` keeps one on disk.

    The embedded default's model has no embeddings: nothing to warm.
    """
    if settings is None:
        return contextlib.nullcontext()
    from esra.starlette._warming import open_store_warmer  # noqa: PLC0415

    return open_store_warmer(settings)


def _worker(args: argparse.Namespace) -> int:
    from esra.core.docstore import StoreSettings  # noqa: PLC0415
    from esra.starlette._log_redaction import redact_root_handlers  # noqa: PLC0415
    from esra.starlette._settings import SettingsError  # noqa: PLC0415
    from esra.starlette._worker import StoreUnavailableError  # noqa: PLC0415

    try:
        lease_s = StoreSettings().lease_s if args.lease is None else args.lease
        store_settings = StoreSettings(lease_s=lease_s, heartbeat_s=args.heartbeat)
    except ValueError as exc:
        message = str(exc).replace("heartbeat_s", "--heartbeat").replace("lease_s", "--lease")
        return _fail(f"worker: {message}")
    try:
        settings = _settings(args)
        stores = _stores(args, settings)
    except SettingsError as exc:
        return _fail(f"worker: {args.config}: {exc}")
    except OSError as exc:
        return _fail(f"worker: cannot create the data directory: {exc}")
    if not stores:
        return _fail(f"worker: no tenant in {args.config} has a document store")
    try:
        # A worker extracts documents: without the extra it can do nothing, initialised
        # store or not, so that is what it says first.
        require_document_extra()
    except MissingExtraError as exc:
        sys.stderr.write(f"esra: worker: {exc}\n")
        return 1
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    redact_root_handlers()
    try:
        with _warmer(settings) as warmer:
            return asyncio.run(
                _in_runtime(
                    args,
                    settings,
                    lambda runtime: _work(
                        runtime,
                        args,
                        on_indexed=warmer,
                        store_settings=store_settings,
                    ),
                )
            )
    except (StoreUnavailableError, MissingExtraError, ConfigurationError) as exc:
        # ConfigurationError: a store kind no installed distribution opens, or options its
        # factory refuses; the message names the setting, never a secret.
        sys.stderr.write(f"esra: worker: {exc}\n")
        return 1
    except KeyboardInterrupt:
        # Ctrl-C before the worker runs (while it connects): nothing was claimed, so the
        # conventional status and no traceback, as `esra serve` does. Once it runs, the
        # first SIGINT stops it after the document in hand and it exits 0.
        return EXIT_INTERRUPTED


async def _work(
    runtime: Runtime,
    args: argparse.Namespace,
    *,
    on_indexed: StoreWarmer | None,
    store_settings: StoreSettings,
) -> int:
    """``esra worker`` inside its runtime: every store the runtime composed, of any kind."""
    from esra.core.docstore import DocumentStoreRegistry  # noqa: PLC0415
    from esra.starlette._worker import (  # noqa: PLC0415
        default_worker_id,
        open_stores,
        serve_worker,
    )

    registry = DocumentStoreRegistry.from_entry_points()
    # A worker never initialises a store, the embedded default's included: it serves the
    # stores an administrator (or, embedded, `esra ingest`) initialised, as they appear.
    also = ", or once `esra ingest` initialises it" if args.config is None else ""
    async with open_stores(runtime.stores, registry=registry) as opened:
        for store in opened.values():
            if not await store.schema_present():
                sys.stderr.write(
                    f"esra: worker: {store.location} is not initialised; it is served once an "
                    f"administrator initialises it (POST /admin/v1/store/initialise){also}\n"
                )
    return await serve_worker(
        runtime.stores,
        once=args.once,
        interval_s=args.interval,
        worker_id=args.worker_id or default_worker_id(),
        on_indexed=on_indexed,
        # The settings' [store] defaults under the worker's own lease; what a tenant
        # configured in its store replaces them at each turn.
        store_settings=runtime.store_defaults.applied_to(store_settings),
        registry=registry,
    )


def _ingest(args: argparse.Namespace) -> int:
    from esra.starlette._embedded import EMBEDDED_TENANT  # noqa: PLC0415
    from esra.starlette._ingest import (  # noqa: PLC0415
        DEFAULT_SCOPE,
        IngestUsageError,
        collect_files,
        ingest,
        render_table,
        summarize,
    )
    from esra.starlette._settings import SettingsError  # noqa: PLC0415
    from esra.starlette._store_init import CliStoreInitialisation, cli_operator, cli_subject  # noqa: PLC0415
    from esra.starlette._worker import StoreUnavailableError, default_worker_id  # noqa: PLC0415

    if args.config is not None and args.tenant is None:
        return _fail("ingest: --config needs --tenant, the tenant whose store receives the files")
    if args.config is None and args.tenant not in (None, EMBEDDED_TENANT):
        return _fail(f"ingest: the embedded default serves tenant {EMBEDDED_TENANT!r} only")
    tenant = args.tenant or EMBEDDED_TENANT
    try:
        files = collect_files(args.path)
        settings = _settings(args)
        stores = _stores(args, settings)
    except IngestUsageError as exc:
        return _fail(f"ingest: {exc}")
    except SettingsError as exc:
        return _fail(f"ingest: {args.config}: {exc}")
    except OSError as exc:
        return _fail(f"ingest: cannot create the data directory: {exc}")
    if tenant not in stores:
        return _fail(f"ingest: tenant {tenant!r} has no document store in {args.config}")
    try:
        # Without indexing nothing is embedded: the worker that indexes warms.
        with _warmer(settings if args.index else None) as warmer:
            rows = asyncio.run(
                _in_runtime(
                    args,
                    settings,
                    lambda runtime: ingest(
                        files,
                        store=runtime.stores[tenant],
                        tenant_id=tenant,
                        scope=DEFAULT_SCOPE if args.scope is None else args.scope,
                        index=args.index,
                        clock=runtime.clock,
                        worker_id=default_worker_id(),
                        err=sys.stderr,
                        # The embedded default's store starts Disabled like any other; its
                        # first ingest initialises it for the user, audited and said so.
                        initialise=(
                            CliStoreInitialisation(
                                cli_operator(tenant),
                                audit=runtime.audit,
                                clock=runtime.clock,
                                err=sys.stderr,
                                what="the embedded document store",
                            )
                            if args.config is None
                            else None
                        ),
                        on_indexed=warmer,
                        uploaded_by=cli_subject(),
                    ),
                )
            )
    except IngestUsageError as exc:
        return _fail(f"ingest: {exc}")
    except (StoreUnavailableError, MissingExtraError, ConfigurationError) as exc:
        sys.stderr.write(f"esra: ingest: {exc}\n")
        return 1
    sys.stdout.write(render_table(rows))
    sys.stderr.write(summarize(rows) + "\n")
    return 0 if all(row.ok for row in rows) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from esra.starlette._demo.run import EXAMPLE_QUESTIONS, run_demo  # noqa: PLC0415

        question = " ".join(args.question).strip()
        questions = [question] if question else list(EXAMPLE_QUESTIONS)
        regions = tuple(args.region or ("emea",))
        return asyncio.run(run_demo(questions, regions=regions, out=sys.stdout))
    if args.command == "serve":
        return _serve(args)
    if args.command == "dev-token":
        return _dev_token(args)
    if args.command == "worker":
        return _worker(args)
    if args.command == "ingest":
        return _ingest(args)
    if callable(getattr(args, "run", None)):  # commands registered from their own modules
        return int(args.run(args))
    return EXIT_USAGE  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
