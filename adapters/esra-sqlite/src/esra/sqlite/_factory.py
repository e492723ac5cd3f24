"""The ``esra.providers`` entry points of esra-sqlite: ``sqlite`` and ``sqlite-document-store``.

A SQLite source's ``connection_ref`` names its database file inside the tenant's databases
directory (never outside it); a document store's file is searched like any other SQLite
source, through the FTS5 index its schema keeps, but only through a mapping that keeps its
record filters (``esra.core.docstore.store_isolation_problem``).

The ``sqlite`` factory states which names SQLite cannot hold (``sqlite_identifier_problem``),
so a mapping naming one is refused when it is published rather than by every search of it:
a NUL, which Python's ``sqlite3`` refuses in a statement, and a lone surrogate, which no
statement's text can encode.
"""

from __future__ import annotations

from esra.core.docstore import store_isolation_problem
from esra.core.providers import (
    CheckedProviderFactory,
    OpenedProvider,
    ProviderOptionError,
    ProviderRequest,
    close_synchronously,
    option_value,
    unencodable_identifier_problem,
)
from esra.sqlite._provider import SqliteFts5Provider

__all__ = [
    "OPTIONS",
    "open_sqlite_provider",
    "open_sqlite_store_provider",
    "sqlite_identifier_problem",
]

OPTIONS = frozenset({"pool_size", "max_rows"})


def sqlite_identifier_problem(name: str) -> str | None:
    """Why SQLite cannot hold ``name`` as one identifier (without repeating it), or ``None``.

    A quoted identifier holds any character, but Python's ``sqlite3`` refuses a statement
    holding a NUL, and the statement's text must encode.
    """
    unencodable = unencodable_identifier_problem(name)
    if unencodable is not None:
        return unencodable
    if "\x00" in name:
        return "it holds a NUL, which no SQLite statement can"
    return None


def _open_sqlite_provider(request: ProviderRequest) -> OpenedProvider:
    """A ``SqliteFts5Provider`` over the source's file (opened lazily, read-only), which
    refuses ESRA's own files: a tenant's document store lives in the directory its plain
    sources name their files in, and its isolation must not be one kind choice away.

    Raises:
        ProviderOptionError: an unknown or unusable option, or a file outside the directory.
    """
    return _opened(request, refuse_esra_files=True)


def _opened(request: ProviderRequest, *, refuse_esra_files: bool) -> OpenedProvider:
    request.refuse_unknown_options(OPTIONS)
    provider = SqliteFts5Provider(
        request.database_file(),
        mappings=request.mappings,
        pool_size=option_value(request, "pool_size", int, 4),
        max_rows=option_value(request, "max_rows", int, 200),
        refuse_esra_files=refuse_esra_files,
    )
    return OpenedProvider(provider, close_synchronously(provider.close))


def _open_sqlite_store_provider(request: ProviderRequest) -> OpenedProvider:
    """The ``SqliteFts5Provider`` over a document store's file, through its store mapping.

    Raises:
        ProviderOptionError: as for ``sqlite``, or a mapping that does not keep the store's
            record filters (over the documents table, say, which holds quarantined text).
    """
    for mapping in request.mappings:
        problem = store_isolation_problem(mapping)
        if problem is not None:
            msg = f"source {request.source.id!r}: mapping {mapping.id!r} {problem}"
            raise ProviderOptionError(msg)
    return _opened(request, refuse_esra_files=False)


open_sqlite_provider = CheckedProviderFactory(_open_sqlite_provider, sqlite_identifier_problem)
open_sqlite_store_provider = CheckedProviderFactory(
    _open_sqlite_store_provider, sqlite_identifier_problem
)
