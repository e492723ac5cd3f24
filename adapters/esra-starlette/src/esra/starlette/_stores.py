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
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import attrs

from esra.core.admin import InMemorySecretVault
from esra.core.docstore import (
    ConfigurableSettings,
    DocumentRepository,
    DocumentStoreRegistry,
    DocumentStoreService,
    OpenedStore,
    StoreConfigurationService,
    StoreLifecycle,
    StoreRequest,
    StoreStatus,
    UploadLimits,
    require_document_extra,
)
from esra.core.hosting import ConfiguredHostAllowlist
from esra.core.ports import AuditSink, Clock
from esra.sqlite import schema_present, store_source

__all__ = [
    "DEFAULT_UPLOAD_SCOPE",
    "StoreSpec",
    "TenantStore",
    "open_tenant_stores",
    "schema_present",
    "sqlite_store_request",
    "store_request",
]

# The security scope a document gets when the uploading administrator names none; callers
# need it in their ``document_scopes`` claim to find the document.
DEFAULT_UPLOAD_SCOPE = "general"

# What names a tenant's store: the request the registry opens, or — for callers that only
# have a file (tests, tools) — the SQLite store file itself.
StoreSpec = StoreRequest | Path


@attrs.frozen
class TenantStore:
    """One tenant's store and the role-checked, audited services over it."""

    tenant_id: str
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
) -> AsyncIterator[dict[str, TenantStore]]:
    """Open each tenant's store through ``registry``; close them all on exit.

    Args:
        stores: per tenant, its store (``HostParts.stores``).
        audit: where the store actions and the engine's initialisation steps are recorded.
        clock: time for those records and the lifecycle.
        limits: the upload limits (the defaults otherwise).
        registry: opens stores by kind (default: the installed ``esra.document_stores``).
        defaults: the settings of a store whose tenant never configured it (``[store]``).

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
    try:
        for tenant_id, spec in stores.items():
            request = attrs.evolve(store_request(tenant_id, spec), audit=audit, clock=clock)
            store = await registry.open(request)
            opened.append(store)
            ready = await store.schema_present()
            served[tenant_id] = TenantStore(
                tenant_id=tenant_id,
                repository=store.repository,
                documents=DocumentStoreService(store.repository, audit=audit, clock=clock),
                lifecycle=StoreLifecycle(
                    tenant_id,
                    store.initialise,
                    audit=audit,
                    clock=clock,
                    status=StoreStatus.READY if ready else StoreStatus.DISABLED,
                ),
                configuration=StoreConfigurationService(
                    store.repository, audit=audit, clock=clock, defaults=defaults
                ),
                limits=limits or UploadLimits(),
            )
        yield served
    finally:
        for tenant_store in served.values():
            await tenant_store.lifecycle.wait()
        for store in opened:
            await store.close()
