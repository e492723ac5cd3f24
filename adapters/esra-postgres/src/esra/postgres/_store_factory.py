"""Store kind ``postgres-document-store``: a tenant's internal document store on PostgreSQL.

esra-postgres registers this kind twice: under ``esra.document_stores``
(:func:`open_postgres_store`, what ingestion and the admin API write through) and under
``esra.providers`` (:func:`open_store_provider`, what searches read through), so a host
composed from settings serves the store without importing this module by name.

The source's ``connection_ref`` is the store principal's connection template
(``postgresql://esra_store:${secret:env:STORE_PASSWORD}@db.internal:5432/esra``): every
connection resolves it anew through the tenant's ``SecretStore`` and checks its host against
the tenant's outbound allowlist before a socket opens. Options (``[tenants.sources.<id>]``):
``schema`` (default ``esra_store``), ``text_search_config`` (default ``english``),
``pool_size``, ``max_rows`` and ``connect_timeout_s``; both factories take the same set, since
one table of the settings configures both.

Opening connects to nothing: the pool starts empty. ``initialise()`` is
``esra.postgres.initialise_store`` — allowlist, a principal that may create in the
schema and is neither a superuser nor BYPASSRLS or CREATEROLE, the schema applied
idempotently, each step audited — and a refusal becomes the lifecycle's
``StoreInitialisationError`` with its classified reason and remedy. The source's mapping
comes from the tenant's configuration, as for any source;
:func:`postgres_store_source` writes the source and its mapping for that configuration.
"""

from __future__ import annotations

import logging
from typing import Any, Unpack
from urllib.parse import urlsplit

import psycopg
import psycopg_pool

from esra.core import SystemClock
from esra.core.audit import LoggingAuditSink
from esra.core.config import Mapping, Source
from esra.core.docstore import (
    DEFAULT_SCOPE_CLAIM,
    OpenedStore,
    StoreInitialisationError,
    StoreMetadata,
    StoreRequest,
    store_isolation_problem,
    store_source,
)
from esra.core.exceptions import ProviderError
from esra.core.providers import OpenedProvider, ProviderOptionError, ProviderRequest, option_value
from esra.postgres._connection import PRIVATE_FILE_OPTIONS, SCHEMES, connect_kwargs
from esra.postgres._errors import classify
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG
from esra.postgres._pool import Pool
from esra.postgres._provider import PostgresProvider
from esra.postgres._store_init import (
    StoreState,
    initialise_store,
    store_mapping,
)
from esra.postgres._store_repository import PostgresDocumentRepository
from esra.postgres._store_schema import (
    DEFAULT_STORE_SCHEMA,
    STORE_SCHEMA_VERSION,
    store_schema_version,
)
from esra.sql import encode_placeholders, resolve_connection

__all__ = [
    "POSTGRES_STORE_KIND",
    "STORE_OPTIONS",
    "open_postgres_store",
    "open_store_provider",
    "postgres_store_source",
]

POSTGRES_STORE_KIND = "postgres-document-store"
STORE_OPTIONS = frozenset(
    {"schema", "text_search_config", "pool_size", "max_rows", "connect_timeout_s"}
)
_log = logging.getLogger("esra.postgres")
_UNEXPECTED_REMEDY = "Initialisation failed; see the server log and retry."


def postgres_store_source(
    tenant_id: str,
    connection: str,
    *,
    source_id: str = "document_store",
    schema: str = DEFAULT_STORE_SCHEMA,
    scope_claim: str = DEFAULT_SCOPE_CLAIM,
    **metadata: Unpack[StoreMetadata],
) -> tuple[Source, Mapping]:
    """The tenant's PostgreSQL store as a source of its configuration, and its mapping.

    Args:
        connection: the store principal's connection template; its password a
            ``${secret:...}`` reference, never a literal.
        schema: the store's schema: the same as the source's ``schema`` option.
        scope_claim: the caller claim holding the document scopes a caller may read.
        metadata: the business metadata sources are selected by (the core's
            ``StoreMetadata``: ``name``, ``description``, ``domain_tags``, ...).

    Raises:
        ValueError: if ``scope_claim`` is empty or reserved (``esra.``).
    """
    mapping = store_mapping(tenant_id, source_id=source_id, schema=schema, scope_claim=scope_claim)
    source = store_source(
        tenant_id,
        source_id=source_id,
        provider_kind=POSTGRES_STORE_KIND,
        connection_ref=connection,
        **metadata,
    )
    return source, mapping


def _location(source: Source, schema: str) -> str:
    """Server, port, database and schema: what an operator recognises, without the user."""
    try:
        parts = urlsplit(encode_placeholders(source.connection_ref))
        port = parts.port
    except ValueError:
        return f"source {source.id!r} (schema {schema})"
    shown = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"postgresql://{shown}:{port or 5432}{parts.path} (schema {schema})"


async def _utc_session(conn: psycopg.AsyncConnection[Any]) -> None:
    # The repository reads timestamps back; they must not depend on the server's TimeZone.
    await conn.execute("SET TIME ZONE 'UTC'")


def _schema(request: ProviderRequest) -> str:
    return option_value(request, "schema", str, DEFAULT_STORE_SCHEMA)


async def open_postgres_store(request: StoreRequest) -> OpenedStore:
    """The store's ``PostgresDocumentRepository`` over a pool that opens no connection yet.

    Raises:
        ProviderOptionError: an unknown or unusable option.
    """
    request.refuse_unknown_options(STORE_OPTIONS)
    source = request.source
    schema = _schema(request)
    config = option_value(request, "text_search_config", str, DEFAULT_TEXT_SEARCH_CONFIG)
    timeout_s = option_value(request, "connect_timeout_s", float, 10.0)
    location = _location(source, schema)

    async def resolved() -> dict[str, Any]:
        # Resolved for every connection: a rotated secret or a host taken off the allowlist
        # applies to the next connection without reopening the store.
        target = await resolve_connection(
            source.connection_ref,
            tenant_id=source.tenant_id,
            secrets=request.secrets,
            allowlist=request.allowlist,
            schemes=SCHEMES,
            private_file_options=PRIVATE_FILE_OPTIONS,
        )
        kwargs = connect_kwargs(target, connect_timeout_s=timeout_s)
        kwargs["application_name"] = "esra-store"
        return kwargs

    pool: Pool = psycopg_pool.AsyncConnectionPool(
        kwargs=resolved,
        min_size=0,  # nothing connects until the store is used
        max_size=option_value(request, "pool_size", int, 4),
        open=False,
        name=f"esra-store-{source.tenant_id}",
        configure=_utc_session,
        timeout=timeout_s,
    )
    await pool.open(wait=False)
    repository = PostgresDocumentRepository(pool, schema=schema)

    async def initialise() -> None:
        outcome = await initialise_store(
            tenant_id=source.tenant_id,
            connection=source.connection_ref,
            secrets=request.secrets,
            allowlist=request.allowlist,
            audit=request.audit or LoggingAuditSink(),
            clock=request.clock or SystemClock(),
            schema=schema,
            text_search_config=config,
            source_id=source.id,
            connect_timeout_s=timeout_s,
        )
        if outcome.state is not StoreState.READY:
            raise StoreInitialisationError(
                outcome.reason or "unexpected_error", outcome.remedy or _UNEXPECTED_REMEDY
            )

    async def present() -> bool:
        # One direct connection, not the pool's: a refusal (host not allowed, secret
        # missing) is known at once instead of after the pool's timeout.
        try:
            kwargs = await resolved()
            async with await psycopg.AsyncConnection.connect(**kwargs) as conn:
                # Ready only at this release's version: an older store's repository
                # queries need the columns its migration adds, which initialising applies.
                return await store_schema_version(conn, schema) == STORE_SCHEMA_VERSION
        except ProviderError as exc:
            _log.warning("document store %s: %s", location, exc.code.value)
        except psycopg.Error as exc:
            _log.warning("document store %s: %s (%s)", location, classify(exc).value, exc)
        return False

    return OpenedStore(
        repository=repository,
        initialise=initialise,
        schema_present=present,
        close=pool.close,
        location=location,
        errors=(psycopg.Error,),
    )


def open_store_provider(request: ProviderRequest) -> OpenedProvider:
    """The read-only ``PostgresProvider`` searching the store through its mapping.

    Raises:
        ProviderOptionError: an unknown or unusable option, a mapping of the source outside
            the store's schema, or one that does not keep tenants and scopes apart
            (``esra.core.docstore.store_isolation_problem``).
    """
    request.refuse_unknown_options(STORE_OPTIONS)
    schema = _schema(request)
    for mapping in request.mappings:
        if mapping.schema not in (None, schema):
            msg = (
                f"source {request.source.id!r}: mapping {mapping.id!r} reads schema "
                f"{mapping.schema!r}, but the store's schema option is {schema!r}"
            )
            raise ProviderOptionError(msg)
        problem = store_isolation_problem(mapping)
        if problem is not None:
            msg = f"source {request.source.id!r}: mapping {mapping.id!r} {problem}"
            raise ProviderOptionError(msg)
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
        search_path=schema,
        connect_timeout_s=option_value(request, "connect_timeout_s", float, 10.0),
    )
    return OpenedProvider(provider, provider.close)
