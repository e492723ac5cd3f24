"""Each tenant's internal document store as the host serves it: repository, actions, lifecycle.

The admin API and the portal act on a store only through :class:`TenantStore`'s core
services (``DocumentStoreService`` for the documents, ``StoreLifecycle`` for enable and
initialise), which check the operator's roles and audit every action; the host adds HTTP.

A store whose database already holds the store schema starts Ready. Any other starts
Disabled: an administrator enables and then initialises it, and initialising creates the
database file and applies the schema in the background.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Mapping
from contextlib import closing
from pathlib import Path

import attrs

from esra.core.docstore.extras import require_document_extra
from esra.core.docstore.lifecycle import StoreInitialisationError, StoreLifecycle, StoreStatus
from esra.core.docstore.management import DocumentStoreService
from esra.core.docstore.upload import UploadLimits
from esra.core.ports import AuditSink, Clock
from esra.sqlite import SqliteDocumentRepository
from esra.sqlite.docstore_schema import store_schema_version

__all__ = ["DEFAULT_UPLOAD_SCOPE", "TenantStore", "open_tenant_stores", "schema_present"]

# The security scope a document gets when the uploading administrator names none; callers
# need it in their ``document_scopes`` claim to find the document.
DEFAULT_UPLOAD_SCOPE = "general"


@attrs.frozen
class TenantStore:
    """One tenant's store and the role-checked, audited services over it."""

    tenant_id: str
    repository: SqliteDocumentRepository
    documents: DocumentStoreService
    lifecycle: StoreLifecycle
    limits: UploadLimits = attrs.field(factory=UploadLimits)
    default_scope: str = DEFAULT_UPLOAD_SCOPE


def schema_present(database: Path) -> bool:
    """Whether ``database`` exists and holds the store schema (never creates the file)."""
    if not database.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as connection:
            return store_schema_version(connection) > 0
    except sqlite3.Error:
        return False


@contextlib.asynccontextmanager
async def open_tenant_stores(
    databases: Mapping[str, Path],
    *,
    audit: AuditSink,
    clock: Clock,
    limits: UploadLimits | None = None,
) -> AsyncIterator[dict[str, TenantStore]]:
    """Open a repository per tenant store database; close them all on exit.

    Raises:
        MissingExtraError: a store is configured but the ``documents`` extra (pypdf,
            python-docx) is not installed — refused at start-up, not at the first PDF.
    """
    if databases:
        require_document_extra()
    stores: dict[str, TenantStore] = {}
    try:
        for tenant_id, database in databases.items():
            repository = SqliteDocumentRepository(database)

            async def initialise(repository: SqliteDocumentRepository = repository) -> None:
                try:
                    await repository.initialize()
                except (OSError, sqlite3.Error) as exc:
                    raise StoreInitialisationError(
                        "database_unavailable",
                        "The store's database file could not be created or written: check "
                        "that its directory exists and is writable by the host, then "
                        "initialise again.",
                    ) from exc

            lifecycle = StoreLifecycle(
                tenant_id,
                initialise,
                audit=audit,
                clock=clock,
                status=StoreStatus.READY if schema_present(database) else StoreStatus.DISABLED,
            )
            stores[tenant_id] = TenantStore(
                tenant_id=tenant_id,
                repository=repository,
                documents=DocumentStoreService(repository, audit=audit, clock=clock),
                lifecycle=lifecycle,
                limits=limits or UploadLimits(),
            )
        yield stores
    finally:
        for store in stores.values():
            await store.lifecycle.wait()
            await store.repository.close()
