"""bootstrap: the one composition root of every ``esra`` process.

``esra serve`` (embedded default or ``--config``), ``esra worker``, ``esra ingest`` and
``esra demo`` all compose their process here::

    async with bootstrap(settings, data_dir=data_dir, purpose=Purpose.SERVE) as runtime:
        app = build_app(runtime.parts(), host=..., port=..., stores=...)

What it composes, in one place:

- the **durable state** (``esra.starlette._durable_state``): the configuration workspaces,
  the encrypted secret table and the audit log, in the ``[state] database`` of the settings
  (SQLite or PostgreSQL) or, for the embedded default, ``state.db`` in the data directory.
  The demo keeps its state in memory: it is a throwaway run;
- the **ports** — ``ConfigRepository``, ``SecretStore``, ``HostAllowlist``, ``AuditSink`` and
  ``Clock`` — each injectable (``config=``, ``secrets=``, ``allowlist=``, ``audit=``,
  ``clock=``); without one, the durable default the settings describe. The configuration is
  a ``DurableConfigRepository`` whose fallback is the settings' (or embedded) snapshots:
  a tenant serves its file configuration until an administrator changes it through the admin
  API, and from then on the database's publication — also after a restart, whatever the file
  says (``docs/configuration.md``, "Which configuration wins");
- the **providers**, one per source of the configuration each tenant is *served* (the
  database's publication when there is one, not only the file's), opened through the
  :class:`~esra.core.providers.ProviderRegistry` that the installed distributions
  fill through the ``esra.providers`` entry points; closed again on exit;
- **one** ``Executor`` for the whole process, shared by every tenant's search and fetch, so
  the per-instance concurrency bound is the process's, not multiplied by the tenants;
- the model, the document-reference keyring, the trusted issuers and the tenants' document
  stores: per tenant, the :class:`~esra.core.docstore.StoreRequest` of its
  store source (of any kind an installed distribution registers under
  ``esra.document_stores``), with the same secrets and allowlist as the providers; the admin
  API, ``esra worker`` and ``esra ingest`` open it through the ``DocumentStoreRegistry``.

**Live publications.** Where the configuration is durable (a ``DurableConfigRepository``)
and providers are opened, a :class:`~esra.core.hosting.ConfigFollower` owns the
providers from start-up on: bootstrap opens the sources each tenant is served at start (a
source that cannot be opened stops the start), then the follower alone opens, reopens and
retires them, exactly as ``SourcePlacement`` places them (directories, provider options,
secrets, allowlist). It is the admin API's publisher, so a publication made on this host is
served with its providers before the publish request is answered; every ``[state]
config_poll_s`` seconds (at once on a PostgreSQL notification, for a PostgreSQL state
database) it applies what other hosts sharing the state database published. It is stopped
before the state and the providers close. With in-memory state there is no follower: the
admin API publishes into the in-memory repository and new sources get no provider.

**Held audit records.** A serving host with a state database also forwards the audit records
held in its configuration store's outbox every ``[state] audit_forward_s`` seconds
(``esra.core.admin.AuditOutboxForwarder``), so the record of a change made while the audit
sink was failing reaches it once the sink recovers, though nothing else changes. The
forwarder is cancelled before the state closes; ``open_state`` forwards once at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator, Mapping
from enum import StrEnum
from pathlib import Path

import attrs

from esra.core import Executor, StaticConfigRepository, SystemClock
from esra.core.admin import (
    AuditOutboxForwarder,
    ConfigPublisher,
    InMemorySecretVault,
    ModelProfile,
    WorkspaceStore,
)
from esra.core.audit import AuditReader, LoggingAuditSink
from esra.core.config import ConfigSnapshot, LifecycleState, Source
from esra.core.docstore import ConfigurableSettings, StoreRequest, StoreStateTable
from esra.core.fetch import Keyring
from esra.core.hosting import (
    ConfigFollower,
    ConfiguredHostAllowlist,
    DurableConfigRepository,
    OpenedProviders,
)
from esra.core.ports import (
    AuditSink,
    Cache,
    Clock,
    ConfigRepository,
    HostAllowlist,
    LanguageModel,
    QuotaStore,
    SecretStore,
    WritableSecretStore,
)
from esra.core.providers import ProviderRegistry, ProviderRequest
from esra.core.secrets import ReferencePolicy
from esra.llm import LocalModel, RemoteModelClient
from esra.sqlite import STORE_PROVIDER_KIND
from esra.starlette._data_dir import prepare_data_dir
from esra.starlette._durable_state import (
    EMBEDDED_DATABASES_DIR,
    embedded_state,
    open_state,
    postgres_connect_kwargs,
)
from esra.starlette._host import HostParts, open_model, store_sources
from esra.starlette._issuers import TrustedIssuer
from esra.starlette._settings import HostSettings, ServerSettings, StateSettings
from esra.starlette._shared_state import SharedState, open_shared_state

__all__ = [
    "Purpose",
    "Runtime",
    "SourcePlacement",
    "bootstrap",
    "default_allowlist",
    "embedded_store_request",
    "store_requests",
    "store_tenants_of",
]

_log = logging.getLogger(__name__)


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
class SourcePlacement:
    """Where and how each tenant's sources are opened, so a source published later is
    opened exactly as one the host started with.

    Attributes:
        databases: per tenant, the directory file-based sources name their files in.
        directories: per tenant and source id, a directory that overrides ``databases``
            (the embedded default's demo databases, rebuilt in a temporary directory).
        options: per tenant and source id, the provider options of the settings.
        store: per tenant, the database its document-store source opens (the embedded
            store's file is the host's, not the configuration's).
    """

    secrets: SecretStore = attrs.field(repr=False)
    allowlist: HostAllowlist
    databases: Mapping[str, Path | None] = attrs.field(factory=dict)
    directories: Mapping[str, Mapping[str, Path]] = attrs.field(factory=dict)
    options: Mapping[str, Mapping[str, Mapping[str, object]]] = attrs.field(factory=dict)
    store: Mapping[str, Path] = attrs.field(factory=dict)

    def request(self, snapshot: ConfigSnapshot, source: Source) -> ProviderRequest:
        """The provider request of ``source``, one of ``snapshot``'s."""
        tenant = snapshot.tenant_id
        opened_as = source
        directory = self.directories.get(tenant, {}).get(source.id, self.databases.get(tenant))
        store = self.store.get(tenant)
        if store is not None and source.provider_kind == STORE_PROVIDER_KIND:
            opened_as = attrs.evolve(source, connection_ref=store.name)
            directory = store.parent
        return ProviderRequest(
            source=opened_as,
            secrets=self.secrets,
            allowlist=self.allowlist,
            mappings=snapshot.mappings_of(source.id),
            databases=directory,
            options=self.options.get(tenant, {}).get(source.id, {}),
        )


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
    # Per tenant with a document store, what its kind's factory opens.
    stores: Mapping[str, StoreRequest] = attrs.field(factory=dict)
    # What a store runs on until its tenant configures it (the settings' ``[store]``).
    store_defaults: ConfigurableSettings = attrs.field(factory=ConfigurableSettings)
    # The configuration each tenant was served at start (the database's publication, or
    # the settings' / embedded snapshot).
    snapshots: tuple[ConfigSnapshot, ...] = ()
    # Receives what the admin API publishes (the durable repository, usually ``config``).
    publisher: ConfigPublisher | None = None
    # Where the admin API keeps drafts (``None``: in its memory) and writes secrets.
    workspaces: WorkspaceStore | None = None
    # Where the processes on the state database share each store's lifecycle state
    # (``None``: no state database, each process keeps its own).
    store_states: StoreStateTable | None = None
    admin_secrets: WritableSecretStore | None = attrs.field(default=None, repr=False)
    # Reads audit records back for ``GET /admin/v1/audit`` (``None``: not readable).
    audit_reader: AuditReader | None = None
    placement: SourcePlacement | None = attrs.field(default=None, repr=False)
    # The host's models as ``GET /admin/v1/lookups`` names them.
    model_profiles: tuple[ModelProfile, ...] = ()
    # Keeps the providers in step with the publications (durable state only); also the
    # ``publisher`` then.
    follower: ConfigFollower | None = attrs.field(default=None, repr=False)
    # ``[redis]``: the cache and the fetch quota shared with the other host processes
    # (``None``: no cache, and a quota in this process's memory).
    cache: Cache | None = None
    quota: QuotaStore | None = None
    # How often ``esra serve`` forwards its document stores' held audit records (``None``:
    # not on a timer; a purpose other than serving).
    audit_forward_s: float | None = None

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
            store_defaults=self.store_defaults,
            audit=self.audit,
            executor=self.executor,
            publisher=self.publisher,
            workspaces=self.workspaces,
            store_states=self.store_states,
            secrets=self.admin_secrets,
            audit_reader=self.audit_reader,
            model_profiles=self.model_profiles,
            cache=self.cache,
            quota=self.quota,
            audit_forward_s=self.audit_forward_s,
        )


def _open_served(
    providers: OpenedProviders, placement: SourcePlacement, snapshot: ConfigSnapshot
) -> None:
    """Open the providers of the sources ``snapshot`` serves (start-up only; nothing connects).

    A retired source gets none, as the ``ConfigFollower`` that owns the providers afterwards
    decides too, so the two never disagree.

    Raises:
        UnknownProviderKindError, ProviderOptionError: a source cannot be opened.
    """
    providers.tenant(snapshot.tenant_id)
    for source in snapshot.sources:
        if source.lifecycle is not LifecycleState.RETIRED:
            providers.open(placement.request(snapshot, source))


async def _follow(
    stack: contextlib.AsyncExitStack,
    runtime: Runtime,
    *,
    repository: DurableConfigRepository,
    placement: SourcePlacement,
    state: StateSettings,
) -> Runtime:
    """Start the ``ConfigFollower`` (and, on PostgreSQL, its LISTEN) on ``stack``.

    One sync runs before the runtime is handed out, so every tenant already published has
    its providers (and thus a ``Retriever``) when the app is built.

    Raises:
        StateDatabaseError: the PostgreSQL state database's template does not resolve.
        Exception: whatever the state database raised during the first sync.
    """
    follower = ConfigFollower(
        repository, runtime.providers, request_for=placement.request, poll_s=state.config_poll_s
    )
    await follower.sync()
    listener = None
    if state.on_postgres and state.database is not None:
        from esra.postgres import ConfigPublicationListener  # noqa: PLC0415

        kwargs = await postgres_connect_kwargs(state.database)
        kwargs["application_name"] = "esra-config-listener"
        listener = ConfigPublicationListener(
            "", follower.wake, schema=state.config_schema, kwargs=kwargs
        )
    stop = asyncio.Event()
    tasks = [asyncio.create_task(follower.run(stop), name="esra-config-follower")]
    if listener is not None:
        tasks.append(asyncio.create_task(listener.run(stop), name="esra-config-listener"))

    async def stop_following() -> None:
        stop.set()
        for task in tasks:
            await task  # neither raises: a failed sync or connection is logged and retried

    stack.push_async_callback(stop_following)
    return attrs.evolve(runtime, follower=follower, publisher=follower)


# The longest a stopping host waits for its audit forwarder to end once cancelled.
_FORWARDER_STOP_S = 10.0


def _forward_held_audit(stack: contextlib.AsyncExitStack, forwarder: AuditOutboxForwarder) -> None:
    """Run ``forwarder`` until ``stack`` closes (before the state it forwards from closes).

    Cancelled mid-forward, the record being delivered stays held for the next forward (this
    host's next start, or another host's timer).
    """
    task = asyncio.create_task(forwarder.run(), name="esra-audit-forwarder")

    async def stop_forwarding() -> None:
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=_FORWARDER_STOP_S)
        if not done:
            _log.warning("the audit outbox forwarder did not stop within %g s", _FORWARDER_STOP_S)
        elif not task.cancelled() and task.exception() is not None:
            _log.error(
                "the audit outbox forwarder ended early (%s)", type(task.exception()).__name__
            )

    stack.push_async_callback(stop_forwarding)


def _writable(secrets: SecretStore) -> WritableSecretStore | None:
    return secrets if callable(getattr(secrets, "put", None)) else None  # type: ignore[return-value]


def default_allowlist(settings: HostSettings) -> ConfiguredHostAllowlist:
    """Each tenant's ``outbound_hosts``: the only hosts its connection templates may name."""
    return ConfiguredHostAllowlist({t.id: t.outbound_hosts for t in settings.tenants})


def store_tenants_of(settings: HostSettings | None, data_dir: Path | None) -> frozenset[str]:
    """The tenants with a document store: the configured ones, or the embedded default's.

    Raises:
        ValueError: neither settings nor a data directory were given.
        OSError: the embedded default's data directory cannot be created.
    """
    from esra.starlette._embedded import EMBEDDED_TENANT  # noqa: PLC0415

    if settings is not None:
        return frozenset(store_sources(settings))
    if data_dir is None:
        msg = "the embedded default needs a data directory"
        raise ValueError(msg)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return frozenset({EMBEDDED_TENANT})


def store_requests(
    settings: HostSettings, *, secrets: SecretStore, allowlist: HostAllowlist
) -> dict[str, StoreRequest]:
    """Per configured tenant with a document-store source, the request its kind's factory
    opens: the source, the tenant's databases directory and the source's options, resolved
    through the same secrets and allowlist as every provider."""
    sources = store_sources(settings)
    requests: dict[str, StoreRequest] = {}
    for tenant in settings.tenants:
        source = sources.get(tenant.id)
        if source is not None:
            requests[tenant.id] = StoreRequest(
                source=source,
                secrets=secrets,
                allowlist=allowlist,
                mappings=tenant.snapshot.mappings_of(source.id),
                databases=tenant.databases,
                options=tenant.source_options.get(source.id, {}),
            )
    return requests


def embedded_store_request(
    data_dir: Path, *, secrets: SecretStore, allowlist: HostAllowlist
) -> StoreRequest:
    """The embedded default's store: its snapshot's store source, kept in the data
    directory's ``document-store.db`` (the host's file, not the configuration's)."""
    from esra.starlette._embedded import STORE_FILE, embedded_snapshot  # noqa: PLC0415

    snapshot = embedded_snapshot()
    source = next(s for s in snapshot.sources if s.provider_kind == STORE_PROVIDER_KIND)
    return StoreRequest(
        source=attrs.evolve(source, connection_ref=STORE_FILE),
        secrets=secrets,
        allowlist=allowlist,
        mappings=snapshot.mappings_of(source.id),
        databases=data_dir,
    )


async def _close_model(model: object) -> None:
    # A remote model client holds a connection pool; the offline model at most the
    # embedding cache's file.
    if isinstance(model, RemoteModelClient):
        await model.aclose()
        return
    close = getattr(model, "close", None)
    if callable(close):
        close()


async def _served(
    config: ConfigRepository, file_snapshot: ConfigSnapshot, workspaces: WorkspaceStore | None
) -> ConfigSnapshot:
    """The snapshot ``config`` serves the tenant now; the file's when it serves none.

    Once a tenant's configuration lives in the database, the database's publication is
    served and the file only seeded it: say so when the file changed since it was adopted.
    """
    tenant = file_snapshot.tenant_id
    served = await config.snapshot(tenant)
    if served is None:
        return file_snapshot
    if workspaces is not None and served is not file_snapshot:
        adopted = await workspaces.workspace_at(tenant, 1)
        if adopted is not None and adopted.snapshot != file_snapshot:
            _log.warning(
                "tenant %s: serving the configuration published through the admin API; the "
                "settings file's configuration changed since it was adopted and is NOT "
                "applied (apply it through the chain with `esra config import`)",
                tenant,
            )
    return served


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
    """Compose the process; close what was opened (providers, model, state) on exit.

    Args:
        settings: the ``--config`` settings; ``None`` for the embedded default (or, with
            ``Purpose.DEMO``, the demo).
        data_dir: the embedded default's data directory (development key, document store,
            ``state.db`` and its keyring).
        purpose: which parts to open.
        registry: opens providers by kind (default: the installed ``esra.providers``).
        config: the configuration repository (default: a ``DurableConfigRepository`` over
            the state database, falling back to the settings' snapshots; in memory without
            a state database).
        secrets: resolves connection secrets (default: the encrypted table of the state
            database plus each tenant's ``env:``/``file:`` policy).
        allowlist: the outbound hosts per tenant (default: :func:`default_allowlist`).
        audit: where audit records go (default: the settings' ``[audit]``; the embedded
            default's ``state.db``; the ``esra.audit`` logger without either).
        clock: time (default: the system clock).
        executor: the process's one executor (default: a new one on ``clock``).
        model: the language model (default: the one ``[model]`` describes).

    Raises:
        SettingsError: the model's settings are unusable.
        KeyringConfigurationError: the secret keyring is missing, unsafe, or lacks a key
            the secret table uses.
        StateDatabaseError: the state database's connection does not resolve.
        UnknownProviderKindError: a source's kind has no installed factory.
        ProviderOptionError: a source's provider options are refused by its factory.
    """
    clock = clock or SystemClock()
    registry = registry or ProviderRegistry.from_entry_points()
    providers = OpenedProviders(registry)
    owned_model: LanguageModel | None = None
    demo = purpose is Purpose.DEMO
    try:
        async with contextlib.AsyncExitStack() as stack:
            shared = await _shared_state(stack, settings, purpose=purpose, clock=clock)
            if executor is None:
                broadcast = shared.broadcast if shared is not None else None
                executor = Executor(clock=clock, broadcast=broadcast)
            if settings is not None:
                state = settings.state if not demo else StateSettings()
                policies: Mapping[str, ReferencePolicy] = {
                    t.id: t.secret_policy for t in settings.tenants
                }
            elif demo:
                state, policies = StateSettings(), {}
            else:
                if data_dir is None:
                    msg = "the embedded default needs a data directory"
                    raise ValueError(msg)
                prepare_data_dir(data_dir)
                state, policies = embedded_state(data_dir), {}
            durable = await open_state(
                stack,
                state,
                policies=policies,
                clock=clock,
                secrets=InMemorySecretVault() if secrets is not None else None,
                audit=audit,
            )
            if purpose is Purpose.SERVE and durable.workspaces is not None:
                # Entered on ``stack`` after the state, so it is stopped before the state closes.
                _forward_held_audit(
                    stack,
                    AuditOutboxForwarder(
                        durable.workspaces, durable.audit, interval_s=state.audit_forward_s
                    ),
                )
            provider_secrets: SecretStore = secrets or durable.secrets
            admin_secrets = _writable(secrets) if secrets is not None else durable.secrets
            if settings is not None:
                runtime = await _configured(
                    settings,
                    purpose=purpose,
                    providers=providers,
                    config=config,
                    durable_workspaces=durable.workspaces,
                    secrets=provider_secrets,
                    allowlist=allowlist or default_allowlist(settings),
                    clock=clock,
                    executor=executor,
                    model=model,
                )
            else:
                runtime = await _embedded(
                    stack,
                    data_dir=data_dir,
                    purpose=purpose,
                    providers=providers,
                    config=config,
                    durable_workspaces=durable.workspaces,
                    secrets=provider_secrets,
                    allowlist=allowlist or ConfiguredHostAllowlist(),
                    clock=clock,
                    executor=executor,
                    model=model,
                )
            if runtime.model is not model:
                owned_model = runtime.model
            runtime = attrs.evolve(
                runtime,
                audit=durable.audit,
                admin_secrets=admin_secrets,
                audit_reader=durable.audit_reader,
                store_states=durable.workspaces,
                cache=shared.cache if shared is not None else None,
                quota=shared.quota if shared is not None else None,
                audit_forward_s=state.audit_forward_s if purpose is Purpose.SERVE else None,
            )
            # live-config follower: entered on ``stack`` after the state, so it stops before the
            # state closes, and before ``providers.aclose()`` below.
            if runtime.placement is not None and isinstance(
                runtime.config, DurableConfigRepository
            ):
                runtime = await _follow(
                    stack,
                    runtime,
                    repository=runtime.config,
                    placement=runtime.placement,
                    state=state,
                )
            yield runtime
    finally:
        await providers.aclose()
        await _close_model(owned_model)


async def _shared_state(
    stack: contextlib.AsyncExitStack,
    settings: HostSettings | None,
    *,
    purpose: Purpose,
    clock: Clock,
) -> SharedState | None:
    """The ``[redis]`` shared state of a serving host (workers and the demo share none)."""
    if settings is None or settings.redis is None or purpose is not Purpose.SERVE:
        return None
    return await stack.enter_async_context(open_shared_state(settings.redis, clock=clock))


def _configuration(
    config: ConfigRepository | None,
    workspaces: WorkspaceStore | None,
    snapshots: tuple[ConfigSnapshot, ...],
) -> tuple[ConfigRepository, ConfigPublisher | None, WorkspaceStore | None]:
    """The repository served, what receives publications, and where drafts are kept."""
    if config is not None:
        publisher = (
            config if isinstance(config, StaticConfigRepository | DurableConfigRepository) else None
        )
        store = workspaces if isinstance(config, DurableConfigRepository) else None
        return config, publisher, store
    fallback = StaticConfigRepository(snapshots)
    if workspaces is None:
        return fallback, fallback, None
    durable = DurableConfigRepository(workspaces, fallback=fallback)
    return durable, durable, workspaces


async def _configured(
    settings: HostSettings,
    *,
    purpose: Purpose,
    providers: OpenedProviders,
    config: ConfigRepository | None,
    durable_workspaces: WorkspaceStore | None,
    secrets: SecretStore,
    allowlist: HostAllowlist,
    clock: Clock,
    executor: Executor,
    model: LanguageModel | None,
) -> Runtime:
    """A ``--config`` host: the settings' tenants, served what the state database holds."""
    files = tuple(t.snapshot for t in settings.tenants)
    repository, publisher, workspaces = _configuration(config, durable_workspaces, files)
    placement = SourcePlacement(
        secrets=secrets,
        allowlist=allowlist,
        databases={t.id: t.databases for t in settings.tenants},
        options={t.id: t.source_options for t in settings.tenants},
    )
    served = tuple([await _served(repository, f, workspaces) for f in files])
    if purpose is Purpose.SERVE and model is None:
        model = open_model(settings.model)
    runtime = Runtime(
        config=repository,
        providers=providers,
        executor=executor,
        audit=LoggingAuditSink(),
        secrets=secrets,
        allowlist=allowlist,
        clock=clock,
        keyring=settings.keyring or Keyring.generate(),
        issuers=settings.issuers if purpose is Purpose.SERVE else (),
        model=model,
        server=settings.server,
        stores=(
            store_requests(settings, secrets=secrets, allowlist=allowlist)
            if purpose is not Purpose.DEMO
            else {}
        ),
        store_defaults=settings.store,
        snapshots=served,
        publisher=publisher,
        workspaces=workspaces,
        placement=placement if purpose is not Purpose.STORES else None,
        model_profiles=(ModelProfile("default", settings.model.kind, settings.model.model),),
    )
    if purpose is not Purpose.STORES:
        for snapshot in served:
            _open_served(providers, placement, snapshot)
    return runtime


async def _embedded(
    stack: contextlib.AsyncExitStack,
    *,
    data_dir: Path | None,
    purpose: Purpose,
    providers: OpenedProviders,
    config: ConfigRepository | None,
    durable_workspaces: WorkspaceStore | None,
    secrets: SecretStore,
    allowlist: HostAllowlist,
    clock: Clock,
    executor: Executor,
    model: LanguageModel | None,
) -> Runtime:
    """The embedded default (or the demo): the demo tenant, its databases in a temporary
    directory removed on exit, and — except for the demo — the data directory's store and
    the SQLite files of sources modelled through the admin API (``databases/``)."""
    from esra.starlette._demo.build import build_demo_databases  # noqa: PLC0415
    from esra.starlette._demo.config import demo_snapshot  # noqa: PLC0415
    from esra.starlette._devtoken import load_or_create_dev_issuer  # noqa: PLC0415
    from esra.starlette._embedded import (  # noqa: PLC0415
        EMBEDDED_TENANT,
        STORE_FILE,
        embedded_snapshot,
    )

    demo = purpose is Purpose.DEMO
    stores = (
        {}
        if demo or data_dir is None
        else {
            EMBEDDED_TENANT: embedded_store_request(data_dir, secrets=secrets, allowlist=allowlist)
        }
    )
    initial = demo_snapshot() if demo else embedded_snapshot()
    repository, publisher, workspaces = _configuration(config, durable_workspaces, (initial,))
    served = await _served(repository, initial, workspaces)
    issuers: tuple[TrustedIssuer, ...] = ()
    if purpose is Purpose.SERVE and data_dir is not None:
        issuer = load_or_create_dev_issuer(data_dir)
        issuers = (issuer.trusted(frozenset({served.tenant_id})),)
        # The store is not initialised here: like a configured one it starts Disabled until
        # an administrator (or `esra ingest`, on the user's behalf) initialises it, audited.
    placement: SourcePlacement | None = None
    if purpose is not Purpose.STORES:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="esra-demo-")))
        demo_sources = demo_snapshot()
        build_demo_databases(directory, demo_sources)
        databases: Path | None = None
        if not demo and data_dir is not None:
            databases = data_dir / EMBEDDED_DATABASES_DIR
            databases.mkdir(mode=0o700, exist_ok=True)
        tenant = served.tenant_id
        placement = SourcePlacement(
            secrets=secrets,
            allowlist=allowlist,
            databases={tenant: databases},
            directories={tenant: {source.id: directory for source in demo_sources.sources}},
            store={tenant: data_dir / STORE_FILE} if not demo and data_dir is not None else {},
        )
        if model is None:
            model = LocalModel()
    runtime = Runtime(
        config=repository,
        providers=providers,
        executor=executor,
        audit=LoggingAuditSink(),
        secrets=secrets,
        allowlist=allowlist,
        clock=clock,
        # Fresh each run: document references do not outlive the process.
        keyring=Keyring.generate(),
        issuers=issuers,
        model=model,
        stores=stores,
        snapshots=(served,),
        publisher=publisher,
        workspaces=workspaces,
        placement=placement,
        model_profiles=(ModelProfile("default", "local"),),
    )
    if placement is not None:
        _open_served(providers, placement, served)
    return runtime
