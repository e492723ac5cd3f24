"""bootstrap: the one composition root of every ``esra`` process.

``esra serve`` (embedded default or ``--config``), ``esra worker``, ``esra ingest`` and
``esra demo`` all compose their process here::

    async with bootstrap(settings, data_dir=data_dir, purpose=Purpose.SERVE) as runtime:
        app = build_app(runtime.parts(), host=..., port=..., stores=...)

What it composes, in one place:

- the **ports** — ``ConfigRepository``, ``SecretStore``, ``HostAllowlist``, ``AuditSink`` and
  ``Clock`` — each injectable (``config=``, ``secrets=``, ``allowlist=``, ``audit=``,
  ``clock=``); without one, the default the settings describe (see :func:`default_secrets`
  and :func:`default_allowlist`);
- the **providers**, one per source of every tenant, opened through the
  :class:`~esra.core.provider_registry.ProviderRegistry` that the installed distributions
  fill through the ``esra.providers`` entry points, so every installed engine is served from
  settings; closed again on exit (``runtime.providers.retire(...)`` closes one);
- **one** ``Executor`` for the whole process, shared by every tenant's search and fetch, so
  the per-instance concurrency bound is the process's, not multiplied by the tenants;
- the model, the document-reference keyring, the trusted issuers and the tenants' document
  store databases.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Mapping
from enum import StrEnum
from pathlib import Path

import attrs

from esra.core.admin.secrets import InMemorySecretVault
from esra.core.clock import SystemClock
from esra.core.config import ConfigSnapshot
from esra.core.fetch.tokens import Keyring
from esra.core.logging_audit import LoggingAuditSink
from esra.core.opened_providers import OpenedProviders
from esra.core.outbound_allowlist import ConfiguredHostAllowlist
from esra.core.pipeline.execution import Executor
from esra.core.ports import (
    AuditSink,
    Clock,
    ConfigRepository,
    HostAllowlist,
    LanguageModel,
    SecretStore,
)
from esra.core.provider_registry import ProviderRegistry, ProviderRequest
from esra.core.secrets.references import ReferenceSecretResolver
from esra.core.secrets.routing import RoutingSecretStore
from esra.core.static_config import StaticConfigRepository
from esra.llm import LocalModel, RemoteModelClient
from esra.sqlite import STORE_PROVIDER_KIND, SqliteDocumentRepository
from esra.starlette.host import HostParts, open_model, store_databases
from esra.starlette.issuers import TrustedIssuer
from esra.starlette.settings import HostSettings, ServerSettings

__all__ = [
    "Purpose",
    "Runtime",
    "bootstrap",
    "default_allowlist",
    "default_secrets",
    "store_databases_of",
]


class Purpose(StrEnum):
    """What the process is composed for; it decides which parts are opened at all."""

    # The MCP host: providers, model, issuers, stores.
    SERVE = "serve"
    # ``esra worker`` / ``esra ingest``: the document stores only — no provider is opened
    # and no model key is needed.
    STORES = "stores"
    # ``esra demo``: the demo tenant's providers and the offline model, no store, no issuer.
    DEMO = "demo"


@attrs.frozen
class Runtime:
    """Everything one process composed; valid inside its ``bootstrap`` block only."""

    config: ConfigRepository
    providers: OpenedProviders
    executor: Executor
    audit: AuditSink
    secrets: SecretStore = attrs.field(repr=False)
    allowlist: HostAllowlist
    clock: Clock
    keyring: Keyring = attrs.field(repr=False)
    issuers: tuple[TrustedIssuer, ...] = ()
    model: LanguageModel | None = None
    server: ServerSettings = attrs.field(factory=ServerSettings)
    # Per tenant with a document store, its SQLite database.
    stores: Mapping[str, Path] = attrs.field(factory=dict)
    snapshots: tuple[ConfigSnapshot, ...] = ()

    def language_model(self) -> LanguageModel:
        """The model searches run with.

        Raises:
            ValueError: the runtime was composed without one (``Purpose.STORES``).
        """
        if self.model is None:
            msg = "this runtime was composed without a model (Purpose.STORES)"
            raise ValueError(msg)
        return self.model

    def parts(self) -> HostParts:
        """The parts ``build_app`` serves.

        Raises:
            ValueError: the runtime was composed without a model (``Purpose.STORES``).
        """
        return HostParts(
            config=self.config,
            providers=self.providers.by_tenant,
            issuers=self.issuers,
            keyring=self.keyring,
            model=self.language_model(),
            server=self.server,
            stores=self.stores,
            audit=self.audit,
            executor=self.executor,
        )


def default_secrets(settings: HostSettings) -> RoutingSecretStore:
    """The secret store a configured host uses unless one is injected.

    ``${secret:env:NAME}`` and ``${secret:file:/path}`` references resolve through a
    ``ReferenceSecretResolver`` under each tenant's ``[tenants.secrets]`` policy (deny-all
    without one); every other reference is a stored secret, kept in memory here (what the
    admin API writes), so it is lost on restart until a durable store is injected.
    """
    resolver = ReferenceSecretResolver({t.id: t.secret_policy for t in settings.tenants})
    return RoutingSecretStore(stored=InMemorySecretVault(), external=resolver)


def default_allowlist(settings: HostSettings) -> ConfiguredHostAllowlist:
    """Each tenant's ``outbound_hosts``: the only hosts its connection templates may name."""
    return ConfiguredHostAllowlist({t.id: t.outbound_hosts for t in settings.tenants})


def store_databases_of(settings: HostSettings | None, data_dir: Path | None) -> dict[str, Path]:
    """Per tenant, its document store's database: the configured ones, or the embedded one.

    Raises:
        ValueError: neither settings nor a data directory were given.
        OSError: the embedded default's data directory cannot be created.
    """
    from esra.starlette.embedded import EMBEDDED_TENANT, STORE_FILE  # noqa: PLC0415

    if settings is not None:
        return store_databases(settings)
    if data_dir is None:
        msg = "the embedded default needs a data directory"
        raise ValueError(msg)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {EMBEDDED_TENANT: data_dir / STORE_FILE}


async def _close_model(model: object) -> None:
    # A remote model client holds a connection pool; the offline model at most the
    # embedding cache's file.
    if isinstance(model, RemoteModelClient):
        await model.aclose()
        return
    close = getattr(model, "close", None)
    if callable(close):
        close()


def _open_tenant(
    providers: OpenedProviders,
    snapshot: ConfigSnapshot,
    *,
    secrets: SecretStore,
    allowlist: HostAllowlist,
    databases: Path | None,
    options: Mapping[str, Mapping[str, object]],
    kinds: frozenset[str] | None = None,
    store_file: str | None = None,
) -> None:
    """Open the providers of ``snapshot``'s sources (of ``kinds`` only, when given)."""
    providers.tenant(snapshot.tenant_id)
    for source in snapshot.sources:
        if kinds is not None and source.provider_kind not in kinds:
            continue
        opened_as = source
        if store_file is not None and source.provider_kind == STORE_PROVIDER_KIND:
            # The embedded store's file name is the host's, not the configuration's.
            opened_as = attrs.evolve(source, connection_ref=store_file)
        providers.open(
            ProviderRequest(
                source=opened_as,
                secrets=secrets,
                allowlist=allowlist,
                mappings=snapshot.mappings_of(source.id),
                databases=databases,
                options=options.get(source.id, {}),
            )
        )


@contextlib.asynccontextmanager
async def bootstrap(
    settings: HostSettings | None = None,
    *,
    data_dir: Path | None = None,
    purpose: Purpose = Purpose.SERVE,
    registry: ProviderRegistry | None = None,
    config: ConfigRepository | None = None,
    secrets: SecretStore | None = None,
    allowlist: HostAllowlist | None = None,
    audit: AuditSink | None = None,
    clock: Clock | None = None,
    executor: Executor | None = None,
    model: LanguageModel | None = None,
) -> AsyncIterator[Runtime]:
    """Compose the process; close what was opened (providers, model) on exit.

    Args:
        settings: the ``--config`` settings; ``None`` for the embedded default (or, with
            ``Purpose.DEMO``, the demo).
        data_dir: the embedded default's data directory (development key, document store).
        purpose: which parts to open.
        registry: opens providers by kind (default: the installed ``esra.providers``).
        config: the configuration repository (default: the settings' snapshots, in memory).
        secrets: resolves connection secrets (default: :func:`default_secrets`).
        allowlist: the outbound hosts per tenant (default: :func:`default_allowlist`).
        audit: where audit records go (default: the ``esra.audit`` logger).
        clock: time (default: the system clock).
        executor: the process's one executor (default: a new one on ``clock``).
        model: the language model (default: the one ``[model]`` describes).

    Raises:
        SettingsError: the model's settings are unusable.
        UnknownProviderKindError: a source's kind has no installed factory.
        ProviderOptionError: a source's provider options are refused by its factory.
    """
    clock = clock or SystemClock()
    registry = registry or ProviderRegistry.from_entry_points()
    providers = OpenedProviders(registry)
    audit = audit or LoggingAuditSink()
    executor = executor or Executor(clock=clock)
    owned_model: LanguageModel | None = None
    try:
        async with contextlib.AsyncExitStack() as stack:
            if settings is not None:
                snapshots = tuple(t.snapshot for t in settings.tenants)
                secrets = secrets or default_secrets(settings)
                allowlist = allowlist or default_allowlist(settings)
                if purpose is Purpose.SERVE and model is None:
                    model = owned_model = open_model(settings.model)
                if purpose is not Purpose.STORES:
                    for tenant in settings.tenants:
                        _open_tenant(
                            providers,
                            tenant.snapshot,
                            secrets=secrets,
                            allowlist=allowlist,
                            databases=tenant.databases,
                            options=tenant.source_options,
                        )
                runtime = Runtime(
                    config=config or StaticConfigRepository(snapshots),
                    providers=providers,
                    executor=executor,
                    audit=audit,
                    secrets=secrets,
                    allowlist=allowlist,
                    clock=clock,
                    keyring=settings.keyring or Keyring.generate(),
                    issuers=settings.issuers if purpose is Purpose.SERVE else (),
                    model=model,
                    server=settings.server,
                    stores=store_databases(settings) if purpose is not Purpose.DEMO else {},
                    snapshots=snapshots,
                )
            else:
                runtime = await _embedded(
                    stack,
                    data_dir=data_dir,
                    purpose=purpose,
                    providers=providers,
                    config=config,
                    secrets=secrets or InMemorySecretVault(),
                    allowlist=allowlist or ConfiguredHostAllowlist(),
                    audit=audit,
                    clock=clock,
                    executor=executor,
                    model=model,
                )
                if runtime.model is not model:
                    owned_model = runtime.model
            yield runtime
    finally:
        await providers.aclose()
        await _close_model(owned_model)


async def _embedded(
    stack: contextlib.AsyncExitStack,
    *,
    data_dir: Path | None,
    purpose: Purpose,
    providers: OpenedProviders,
    config: ConfigRepository | None,
    secrets: SecretStore,
    allowlist: HostAllowlist,
    audit: AuditSink,
    clock: Clock,
    executor: Executor,
    model: LanguageModel | None,
) -> Runtime:
    """The embedded default (or the demo): the demo tenant, its databases in a temporary
    directory removed on exit, and — except for the demo — the data directory's store."""
    from esra.starlette.demo.build import build_demo_databases  # noqa: PLC0415
    from esra.starlette.demo.config import demo_snapshot  # noqa: PLC0415
    from esra.starlette.devtoken import load_or_create_dev_issuer  # noqa: PLC0415
    from esra.starlette.embedded import STORE_FILE, embedded_snapshot  # noqa: PLC0415

    demo = purpose is Purpose.DEMO
    stores = {} if demo else store_databases_of(None, data_dir)
    snapshot = demo_snapshot() if demo else embedded_snapshot()
    issuers: tuple[TrustedIssuer, ...] = ()
    if purpose is Purpose.SERVE and data_dir is not None:
        issuer = load_or_create_dev_issuer(data_dir)
        issuers = (issuer.trusted(frozenset({snapshot.tenant_id})),)
        for store_path in stores.values():
            repository = SqliteDocumentRepository(store_path)
            try:
                await repository.initialize()  # idempotent: creates the schema on first use
            finally:
                await repository.close()
    if purpose is not Purpose.STORES:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="esra-demo-")))
        demo_sources = demo_snapshot()
        build_demo_databases(directory, demo_sources)
        _open_tenant(
            providers,
            demo_sources,
            secrets=secrets,
            allowlist=allowlist,
            databases=directory,
            options={},
        )
        if not demo and data_dir is not None:
            _open_tenant(
                providers,
                snapshot,
                kinds=frozenset({STORE_PROVIDER_KIND}),
                secrets=secrets,
                allowlist=allowlist,
                databases=data_dir,
                options={},
                store_file=STORE_FILE,
            )
        if model is None:
            model = LocalModel()
    return Runtime(
        config=config or StaticConfigRepository([snapshot]),
        providers=providers,
        executor=executor,
        audit=audit,
        secrets=secrets,
        allowlist=allowlist,
        clock=clock,
        # Fresh each run: document references do not outlive the process.
        keyring=Keyring.generate(),
        issuers=issuers,
        model=model,
        stores=stores,
        snapshots=(snapshot,),
    )
