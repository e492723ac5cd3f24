"""Each tenant's internal document store as the host serves it: repository, actions, lifecycle.

The admin API and the portal act on a store only through :class:`TenantStore`'s core
services (``DocumentStoreService`` for the documents, ``StoreLifecycle`` for enable and
initialise), which check the operator's roles and audit every action; the host adds HTTP.

A store is opened through the :class:`~esra.core.docstore.DocumentStoreRegistry`
by its source's kind (SQLite, PostgreSQL, or whatever an installed distribution registers
under ``esra.document_stores``), so nothing here knows an engine. A store whose database
already holds the store schema starts Ready. Any other starts Disabled: an administrator
enables and then initialises it, and initialising runs the engine's ``initialise()`` in the
background (SQLite: create the file and apply the schema; PostgreSQL: the principal and
allowlist checks, then the schema).

Ready is also learnt from the database: while a store is not Ready, the host looks every
``READINESS_POLL_S`` for its schema, so a store initialised by another process on the same
database — another host, another worker of ``esra serve --workers``, ``esra ingest`` beside
a running host — is Ready here too, for uploads and for search alike. Until then the
pipeline does not search it (:func:`ready_stores_config`). With a shared
``StoreStateTable`` (the host's state database) the other states are shared too: enabled
through one process, initialised through another, and still Enabled or Failed after a
restart.

An operator's release, reindex or delete holds its audit record in the store's own audit
outbox, written with the action. The host forwards what a store's outbox holds to its audit
sink when it opens a Ready store (so the record of an action whose process was killed before
delivering it reaches the audit log on the next start) and, given ``audit_forward_s`` (as
``esra serve`` is), every that many seconds for each Ready store, so a record held while the
sink was failing is delivered once it recovers, with no further action.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import attrs

from esra.core.admin import DEFAULT_AUDIT_FORWARD_S, AuditOutboxForwarder, InMemorySecretVault
from esra.core.docstore import (
    ConfigurableSettings,
    DocumentRepository,
    DocumentStoreRegistry,
    DocumentStoreService,
    OpenedStore,
    ReadyStoresConfig,
    StoreConfigurationService,
    StoreLifecycle,
    StoreRequest,
    StoreStateTable,
    StoreStatus,
    TenantStoreSource,
    UploadLimits,
    require_document_extra,
)
from esra.core.hosting import ConfiguredHostAllowlist
from esra.core.ports import AuditSink, Cache, Clock, ConfigRepository
from esra.sqlite import schema_present, store_source

__all__ = [
    "DEFAULT_UPLOAD_SCOPE",
    "READINESS_POLL_S",
    "StoreSpec",
    "TenantStore",
    "open_tenant_stores",
    "ready_stores_config",
    "schema_present",
    "sqlite_store_request",
    "store_request",
]

# The security scope a document gets when the uploading administrator names none; callers
# need it in their ``document_scopes`` claim to find the document.
DEFAULT_UPLOAD_SCOPE = "general"

# How often a host looks for the schema of a store it does not know Ready. It bounds how long
# after another process initialised a store this host still refuses its uploads and leaves
# it out of search; one catalogue read per unready store per interval costs nothing.
READINESS_POLL_S = 2.0

_log = logging.getLogger(__name__)

# What names a tenant's store: the request the registry opens, or — for callers that only
# have a file (tests, tools) — the SQLite store file itself.
StoreSpec = StoreRequest | Path


@attrs.frozen
class TenantStore:
    """One tenant's store and the role-checked, audited services over it.

    ``source_id`` is the store's source in the tenant's configuration: the one the
    pipeline leaves out of search until ``lifecycle`` is Ready.
    """

    tenant_id: str
    source_id: str
    repository: DocumentRepository
    documents: DocumentStoreService
    lifecycle: StoreLifecycle
    configuration: StoreConfigurationService
    limits: UploadLimits = attrs.field(factory=UploadLimits)
    default_scope: str = DEFAULT_UPLOAD_SCOPE


def sqlite_store_request(tenant_id: str, database: Path) -> StoreRequest:
    """The request of a SQLite store kept in ``database`` (no secret, no outbound host)."""
    source, _mapping = store_source(tenant_id, connection_ref=database.name)
    return StoreRequest(
        source=source,
        secrets=InMemorySecretVault(),
        allowlist=ConfiguredHostAllowlist(),
        databases=database.parent,
    )


def store_request(tenant_id: str, spec: StoreSpec) -> StoreRequest:
    """``spec`` as the request the registry opens."""
    return spec if isinstance(spec, StoreRequest) else sqlite_store_request(tenant_id, spec)


@contextlib.asynccontextmanager
async def open_tenant_stores(
    stores: Mapping[str, StoreSpec],
    *,
    audit: AuditSink,
    clock: Clock,
    limits: UploadLimits | None = None,
    registry: DocumentStoreRegistry | None = None,
    defaults: ConfigurableSettings | None = None,
    readiness_poll_s: float = READINESS_POLL_S,
    shared: StoreStateTable | None = None,
    cache: Cache | None = None,
    audit_forward_s: float | None = None,
) -> AsyncIterator[dict[str, TenantStore]]:
    """Open each tenant's store through ``registry``; close them all on exit.

    While they are open, a store not Ready here is looked at every ``readiness_poll_s``
    and taken as Ready once its schema is present (initialised by another process).

    Args:
        stores: per tenant, its store (``HostParts.stores``).
        audit: where the store actions and the engine's initialisation steps are recorded.
        clock: time for those records and the lifecycle.
        limits: the upload limits (the defaults otherwise).
        registry: opens stores by kind (default: the installed ``esra.document_stores``).
        defaults: the settings of a store whose tenant never configured it (``[store]``).
        readiness_poll_s: how often an unready store's schema is looked for.
        shared: where the processes serving these stores record each store's state
            (the host's state database); ``None``: each process keeps its own.
        cache: the host's result cache (``HostParts.cache``): deleting or re-indexing a
            document renews the tenant's content generation there, so no cached response
            shows it again.
        audit_forward_s: how often the audit records held in each Ready store's outbox are
            forwarded to ``audit`` (``None``: only when a store is opened Ready, and after
            each action).

    Raises:
        MissingExtraError: a store is configured but the ``documents`` extra (pypdf,
            python-docx) is not installed — refused at start-up, not at the first PDF.
        UnknownStoreKindError: a store's kind has no installed factory.
        ProviderOptionError: a store's options are refused by its factory.
    """
    if stores:
        require_document_extra()
    registry = registry or DocumentStoreRegistry.from_entry_points()
    opened: list[OpenedStore] = []
    served: dict[str, TenantStore] = {}
    following: asyncio.Task[None] | None = None
    forwarding: asyncio.Task[None] | None = None
    forwarders: dict[str, AuditOutboxForwarder] = {}
    try:
        for tenant_id, spec in stores.items():
            request = attrs.evolve(store_request(tenant_id, spec), audit=audit, clock=clock)
            store = await registry.open(request)
            opened.append(store)
            ready = await store.schema_present()
            lifecycle = StoreLifecycle(
                tenant_id,
                store.initialise,
                audit=audit,
                clock=clock,
                status=StoreStatus.READY if ready else StoreStatus.DISABLED,
                shared=shared,
            )
            # Enabled or Failed through another process, or before a restart.
            await lifecycle.refresh(schema_present=ready)
            forwarder = AuditOutboxForwarder(
                store.repository, audit, interval_s=audit_forward_s or DEFAULT_AUDIT_FORWARD_S
            )
            forwarders[tenant_id] = forwarder
            if ready:
                # The records of actions whose process died before delivering them.
                await forwarder.forward()
            served[tenant_id] = TenantStore(
                tenant_id=tenant_id,
                source_id=request.source.id,
                repository=store.repository,
                documents=DocumentStoreService(
                    store.repository, audit=audit, clock=clock, cache=cache
                ),
                lifecycle=lifecycle,
                configuration=StoreConfigurationService(
                    store.repository, audit=audit, clock=clock, defaults=defaults
                ),
                limits=limits or UploadLimits(),
            )
        following = asyncio.create_task(
            _follow_readiness(
                [(served[t], store) for t, store in zip(served, opened, strict=True)],
                readiness_poll_s,
            )
        )
        if audit_forward_s is not None and served:
            forwarding = asyncio.create_task(
                _forward_held_audit([(served[t], forwarders[t]) for t in served], audit_forward_s),
                name="esra-store-audit-forwarder",
            )
        yield served
    finally:
        if forwarding is not None:
            forwarding.cancel()
            await asyncio.wait([forwarding])
        if following is not None:
            following.cancel()
            # Waited, not awaited: a cancellation of this task (Ctrl-C) must still reach
            # the caller, and awaiting the cancelled follower would raise one it cannot tell
            # from its own.
            await asyncio.wait([following])
            if not following.cancelled() and following.exception() is not None:
                _log.error("following the stores' readiness failed", exc_info=following.exception())
        for tenant_store in served.values():
            await tenant_store.lifecycle.wait()
        for store in opened:
            await store.close()


def ready_stores_config(
    config: ConfigRepository, stores: Mapping[str, TenantStore]
) -> ConfigRepository:
    """``config`` as the pipeline reads it: each tenant's store source searched only while
    its store is Ready (``esra.core.docstore.ReadyStoresConfig``); ``config`` itself when
    no tenant has a store."""
    if not stores:
        return config
    return ReadyStoresConfig(
        config,
        {
            tenant_id: TenantStoreSource(store.source_id, store.lifecycle)
            for tenant_id, store in stores.items()
        },
    )


async def _follow_readiness(
    stores: Sequence[tuple[TenantStore, OpenedStore]], interval_s: float
) -> None:
    """Until every store is Ready, look every ``interval_s`` at those that are not: take one
    whose schema is present as Ready, and any other's state as the shared table records it
    (``StoreLifecycle.refresh``)."""
    waiting = list(stores)
    failing: set[str] = set()
    while waiting:
        await asyncio.sleep(interval_s)
        still: list[tuple[TenantStore, OpenedStore]] = []
        for tenant_store, store in waiting:
            lifecycle = tenant_store.lifecycle
            if lifecycle.current.status is StoreStatus.READY:
                continue  # initialised here
            if await _refreshed(tenant_store.tenant_id, lifecycle, store, failing):
                _log.info(
                    "the document store of tenant %s was initialised by another process;"
                    " it is Ready here and searched",
                    tenant_store.tenant_id,
                )
            else:
                still.append((tenant_store, store))
        waiting = still


async def _forward_held_audit(
    stores: Sequence[tuple[TenantStore, AuditOutboxForwarder]], interval_s: float
) -> None:
    """Every ``interval_s``, forward what each Ready store's audit outbox holds (a store not
    Ready may have no outbox yet). A failed forward is logged and tried on the next tick."""
    while True:
        await asyncio.sleep(interval_s)
        for tenant_store, forwarder in stores:
            if tenant_store.lifecycle.current.status is StoreStatus.READY:
                await forwarder.forward()


async def _refreshed(
    tenant_id: str, lifecycle: StoreLifecycle, store: OpenedStore, failing: set[str]
) -> bool:
    """Refresh ``lifecycle`` from the store's database and the shared table; whether it is
    Ready. A store whose database or table cannot be read stays as it was (logged once per
    run of failures, not once per look)."""
    try:
        present = await store.schema_present()
        state = await lifecycle.refresh(schema_present=present)
    except Exception:
        if tenant_id not in failing:
            failing.add(tenant_id)
            _log.warning(
                "looking for the document store of tenant %s failed", tenant_id, exc_info=True
            )
        return False
    failing.discard(tenant_id)
    return state.status is StoreStatus.READY
