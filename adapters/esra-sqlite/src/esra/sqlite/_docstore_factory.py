"""The ``esra.document_stores`` entry point of esra-sqlite: store kind ``sqlite-document-store``.

The store's ``connection_ref`` names its database file inside the tenant's databases
directory (never outside it), as for any SQLite source. Opening creates nothing: the file and
its schema appear when an administrator initialises the store (``initialise()``), and
``schema_present()`` only reads, so a store nobody initialised stays absent on disk.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from esra.core.docstore import OpenedStore, StoreInitialisationError, StoreRequest
from esra.sqlite._docstore import SqliteDocumentRepository
from esra.sqlite._docstore_schema import STORE_SCHEMA_VERSION, store_schema_version
from esra.sqlite._factory import OPTIONS

__all__ = ["open_sqlite_store", "schema_present"]

_UNWRITABLE_REMEDY = (
    "The store's database file could not be created or written: check that its directory "
    "exists and is writable by the host, then initialise again."
)


def schema_present(database: Path) -> bool:
    """Whether ``database`` exists and holds the store schema at this release's version
    (never creates the file). An older store is not ready: its repository needs the columns
    its migration adds, which initialising it again applies in place."""
    if not database.is_file():
        return False
    try:
        with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as connection:
            return store_schema_version(connection) == STORE_SCHEMA_VERSION
    except sqlite3.Error:
        return False


async def open_sqlite_store(request: StoreRequest) -> OpenedStore:
    """A ``SqliteDocumentRepository`` over the source's file (opened on first use).

    The source's options are the provider's (``pool_size``, ``max_rows``): the same table
    of the settings configures both, so the store accepts exactly what the provider does.

    Raises:
        ProviderOptionError: an unknown option, or a file outside the databases directory.
    """
    request.refuse_unknown_options(OPTIONS)
    database = request.database_file()
    repository = SqliteDocumentRepository(database)

    async def initialise() -> None:
        try:
            await repository.initialize()
        except (OSError, sqlite3.Error) as exc:
            raise StoreInitialisationError("database_unavailable", _UNWRITABLE_REMEDY) from exc

    async def present() -> bool:
        return await asyncio.to_thread(schema_present, database)

    return OpenedStore(
        repository=repository,
        initialise=initialise,
        schema_present=present,
        close=repository.close,
        location=database,
        errors=(sqlite3.Error, OSError),
    )
