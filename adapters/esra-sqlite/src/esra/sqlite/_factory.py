"""The ``esra.providers`` entry points of esra-sqlite: ``sqlite`` and ``sqlite-document-store``.

A SQLite source's ``connection_ref`` names its database file inside the tenant's databases
directory (never outside it); a document store's file is searched like any other SQLite
source, through the FTS5 index its schema keeps.
"""

from __future__ import annotations

from esra.core.providers import OpenedProvider, ProviderRequest, close_synchronously, option_value
from esra.sqlite._provider import SqliteFts5Provider

__all__ = ["OPTIONS", "open_sqlite_provider"]

OPTIONS = frozenset({"pool_size", "max_rows"})


def open_sqlite_provider(request: ProviderRequest) -> OpenedProvider:
    """A ``SqliteFts5Provider`` over the source's file (opened lazily, read-only).

    Raises:
        ProviderOptionError: an unknown or unusable option, or a file outside the directory.
    """
    request.refuse_unknown_options(OPTIONS)
    provider = SqliteFts5Provider(
        request.database_file(),
        mappings=request.mappings,
        pool_size=option_value(request, "pool_size", int, 4),
        max_rows=option_value(request, "max_rows", int, 200),
    )
    return OpenedProvider(provider, close_synchronously(provider.close))
