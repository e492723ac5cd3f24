"""The ``esra.providers`` entry point of esra-postgres: provider kind ``postgres``.

The source's ``connection_ref`` is its connection template
(``postgresql://reader:${secret:env:PG_PASSWORD}@db.internal:5432/sales``); nothing connects
until the first search, which resolves the secret through the tenant's ``SecretStore`` and
checks the host against its outbound allowlist first.

The factory states which names PostgreSQL cannot hold (``postgres_identifier_problem``), so a
mapping naming one is refused when it is published rather than by every search of it: a NUL,
which no identifier can hold. A name over 63 bytes is not refused: PostgreSQL truncates it to
its first 63 (``NAMEDATALEN - 1``) when an object is created and again when it is named, so it
reaches the same relation or column, and a mapping that works today must go on working.
"""

from __future__ import annotations

from esra.core.providers import (
    CheckedProviderFactory,
    OpenedProvider,
    ProviderRequest,
    option_value,
    unencodable_identifier_problem,
)
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG
from esra.postgres._provider import PostgresProvider

__all__ = [
    "OPTIONS",
    "open_postgres_provider",
    "postgres_identifier_problem",
]

OPTIONS = frozenset(
    {"pool_size", "max_rows", "text_search_config", "search_path", "connect_timeout_s"}
)


def postgres_identifier_problem(name: str) -> str | None:
    """Why PostgreSQL cannot hold ``name`` as one identifier (without repeating it), or ``None``.

    A quoted identifier holds any character but NUL (and the statement's text must encode).
    """
    unencodable = unencodable_identifier_problem(name)
    if unencodable is not None:
        return unencodable
    if "\x00" in name:
        return "it holds a NUL, which no PostgreSQL identifier can"
    return None


def _open_postgres_provider(request: ProviderRequest) -> OpenedProvider:
    """A pooled, read-only ``PostgresProvider`` for the source (its pool opens on first use).

    Raises:
        ProviderOptionError: an unknown or unusable option.
    """
    request.refuse_unknown_options(OPTIONS)
    provider = PostgresProvider(
        tenant_id=request.tenant_id,
        connection=request.source.connection_ref,
        secrets=request.secrets,
        allowlist=request.allowlist,
        mappings=request.mappings,
        pool_size=option_value(request, "pool_size", int, 4),
        max_rows=option_value(request, "max_rows", int, 200),
        text_search_config=option_value(
            request, "text_search_config", str, DEFAULT_TEXT_SEARCH_CONFIG
        ),
        search_path=option_value(request, "search_path", str, "public"),
        connect_timeout_s=option_value(request, "connect_timeout_s", float, 10.0),
    )
    return OpenedProvider(provider, provider.close)


open_postgres_provider = CheckedProviderFactory(
    _open_postgres_provider, postgres_identifier_problem
)
