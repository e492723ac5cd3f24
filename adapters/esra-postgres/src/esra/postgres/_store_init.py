"""Initialise the internal document store: an explicit, audited background job.

``initialise_store`` (or ``StoreInitJob.start`` for a Portal that polls) does, in order:

1. resolves the store's connection template with ``esra.sql.resolve_connection`` — secrets
   substituted and the host checked against the tenant's ``HostAllowlist`` before any socket
   opens;
2. checks the principal: it must be able to create objects in the configured schema (CREATE on
   the schema, or on the database when the schema does not exist yet) and must NOT be a
   superuser (``SUPERUSER_PRINCIPAL``) nor have ``BYPASSRLS`` or ``CREATEROLE``
   (``PRIVILEGED_PRINCIPAL``) — the store principal is the one ESRA principal with DDL, so it
   is scoped tightly;
3. applies the store schema idempotently (``apply_store_schema``), recording its version in
   the store's own schema;
4. registers the store as a synthetic source: the core's store ``Source`` and ``Mapping``
   (``esra.core._docstore.store_source``) over the ``searchable_segments`` view (record key =
   document id; record filters on the tenant via
   ``esra.core._pipeline.validation.TENANT_CLAIM`` and on the document scope via a caller
   claim), so a ``PostgresProvider`` searches it through the ordinary pipeline with no
   special-casing.

The store moves Initializing → Ready or Failed; every transition is recorded through the
``AuditSink`` port with the tenant, and a failure carries a classified reason and a remedy
(driver text goes to the ``esra.postgres`` log only).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Unpack

import attrs
import psycopg

from esra.core import docstore as shared
from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent, ProviderErrorCode
from esra.core.config import Mapping, Operator, Source
from esra.core.docstore import DEFAULT_SCOPE_CLAIM, StoreMetadata, check_scope_claim
from esra.core.exceptions import ProviderError
from esra.core.ports import AuditSink, Clock, HostAllowlist, SecretStore
from esra.postgres._connection import PRIVATE_FILE_OPTIONS, SCHEMES, connect_kwargs
from esra.postgres._errors import classify
from esra.postgres._fulltext import DEFAULT_TEXT_SEARCH_CONFIG
from esra.postgres._store_schema import (
    DEFAULT_STORE_SCHEMA,
    StoreSchemaConflictError,
    apply_store_schema,
    store_schema_statements,
    store_schema_version,
)
from esra.sql import resolve_connection

__all__ = [
    "DEFAULT_SCOPE_CLAIM",
    "STORE_AUDIT_EVENT",
    "StoreFailure",
    "StoreInitJob",
    "StoreInitialisation",
    "StoreState",
    "initialise_store",
    "store_mapping",
    "store_source",
]

_log = logging.getLogger("esra.postgres")

# esra.core.codes.AuditEvent has no store event yet; this value is what the store records
# under, typed as an AuditEvent until the closed set gains it (see the module's report).
STORE_AUDIT_EVENT = AuditEvent.STORE_INITIALISE


class StoreState(StrEnum):
    """The store's lifecycle as the Portal shows it."""

    INITIALIZING = "initializing"
    READY = "ready"
    FAILED = "failed"


class StoreFailure(StrEnum):
    """Why initialisation refused, beyond the connection codes (``ProviderErrorCode``)."""

    SUPERUSER_PRINCIPAL = "SUPERUSER_PRINCIPAL"
    PRIVILEGED_PRINCIPAL = "PRIVILEGED_PRINCIPAL"
    SCHEMA_NOT_WRITABLE = "SCHEMA_NOT_WRITABLE"
    SCHEMA_CONFLICT = "SCHEMA_CONFLICT"


_REMEDIES: dict[str, str] = {
    StoreFailure.SUPERUSER_PRINCIPAL: (
        "The store principal is a superuser. Create a dedicated role with CREATE on the "
        "store's database (or schema) only, and configure the store with it."
    ),
    StoreFailure.PRIVILEGED_PRINCIPAL: (
        "The store principal has BYPASSRLS or CREATEROLE. Create a dedicated role with "
        "NOBYPASSRLS NOCREATEROLE and CREATE on the store's database (or schema) only, and "
        "configure the store with it."
    ),
    StoreFailure.SCHEMA_NOT_WRITABLE: (
        "The store principal cannot create objects in the configured schema. Grant it CREATE "
        "on the schema, or on the database if the schema does not exist yet."
    ),
    StoreFailure.SCHEMA_CONFLICT: (
        "The schema already holds a store applied with another text search configuration. "
        "Configure the same one, or use another schema."
    ),
    ProviderErrorCode.HOST_NOT_ALLOWED: "Allow the store's host and port for this tenant.",
    ProviderErrorCode.SECRET_UNRESOLVED: "Define the secret the store's connection names.",
    ProviderErrorCode.CONNECTION_TEMPLATE_INVALID: "Correct the store's connection template.",
    ProviderErrorCode.AUTH_FAILED: "Check the store principal's credentials.",
    ProviderErrorCode.CONNECTION_REFUSED: "Check that the store's database is reachable.",
    ProviderErrorCode.PERMISSION_DENIED: (
        "The store principal lacks a privilege the schema needs; grant CREATE on the schema."
    ),
}
_DEFAULT_REMEDY = "Initialisation failed; see the server log and retry."

_PRINCIPAL = (
    "SELECT r.rolsuper, r.rolbypassrls OR r.rolcreaterole, n.oid IS NOT NULL,"
    " CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE')"
    " ELSE has_schema_privilege(n.oid, 'CREATE') END"
    " FROM pg_roles AS r LEFT JOIN pg_namespace AS n ON n.nspname = %(schema)s"
    " WHERE r.rolname = current_user"
)


@attrs.frozen
class StoreInitialisation:
    """The outcome of one initialisation.

    ``source`` and ``mapping`` (Ready only) register the store with the ordinary retrieval
    path; ``reason`` is a ``StoreFailure`` or ``ProviderErrorCode`` value when Failed.
    """

    state: StoreState
    schema: str
    text_search_config: str
    schema_version: int = 0
    applied: bool = False
    source: Source | None = None
    mapping: Mapping | None = None
    reason: str | None = None
    remedy: str | None = None


def store_source(
    tenant_id: str,
    connection: str,
    *,
    source_id: str = "document_store",
    **metadata: Unpack[StoreMetadata],
) -> Source:
    """The synthetic source the store is searched as (``provider_kind`` ``postgres``).

    ``metadata`` is the core's ``StoreMetadata`` (``name``, ``description``, ...), with the
    core's defaults.
    """
    return shared.store_source(
        tenant_id,
        source_id=source_id,
        provider_kind="postgres",
        connection_ref=connection,
        **metadata,
    )


def store_mapping(
    tenant_id: str,
    *,
    source_id: str = "document_store",
    schema: str = DEFAULT_STORE_SCHEMA,
    scope_claim: str = DEFAULT_SCOPE_CLAIM,
) -> Mapping:
    """The core's store mapping over ``<schema>.searchable_segments``, on the ``tsv`` column.

    Record key is the document id, so a document's segments roll up to one result and its
    best-scoring segment supplies the fragment; tenant and scope are bound from claims by
    the mapping's record filters (``esra.core._docstore.store_source``).

    Raises:
        ValueError: if ``scope_claim`` is empty or reserved (``esra.``).
    """
    return shared.store_mapping(
        tenant_id,
        source_id=source_id,
        mapping_id=f"{source_id}_segments",
        text_index="tsv",
        schema=schema,
        scope_claim=scope_claim,
        # The view keeps the segment's ``label``; the tsvector weights the title in (A).
        section_column="label",
        title_in_text_index=True,
        # What PostgreSQL store results and plans have always had (see the core's docstring).
        document_field="document",
        format_operators=frozenset({Operator.EQ, Operator.IN}),
        updated_returnable=False,
    )


def _failure(reason: str) -> tuple[str, str]:
    return reason, _REMEDIES.get(reason, _DEFAULT_REMEDY)


class _RefusedError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def _audit(
    audit: AuditSink,
    clock: Clock,
    *,
    tenant_id: str,
    correlation_id: str,
    state: StoreState,
    schema: str,
    reason: str | None = None,
    version: int | None = None,
) -> None:
    dimensions: dict[str, str | int | None] = {"state": state.value, "schema": schema}
    if version is not None:
        dimensions["schema_version"] = version
    await audit.record(
        AuditRecord(
            event=STORE_AUDIT_EVENT,
            tenant_id=tenant_id,
            correlation_id=correlation_id,
            at=clock.now(),
            outcome="failed" if state is StoreState.FAILED else "ok",
            reason=reason,
            dimensions=dimensions,
        )
    )


async def _check_principal(conn: psycopg.AsyncConnection[Any], schema: str) -> None:
    cursor = await conn.execute(_PRINCIPAL, {"schema": schema})
    row = await cursor.fetchone()
    if row is None:
        raise _RefusedError(StoreFailure.SCHEMA_NOT_WRITABLE)
    superuser, privileged, _exists, can_create = (bool(v) for v in row)
    if superuser:
        raise _RefusedError(StoreFailure.SUPERUSER_PRINCIPAL)
    # Either attribute reaches past the one schema the store needs: BYPASSRLS reads every
    # table the role may select past every row-level security policy (a deployment's tenant
    # isolation); CREATEROLE makes roles and, up to PostgreSQL 15, grants itself any
    # non-superuser role, pg_execute_server_program (a shell as the server's account) among
    # them. Neither is needed for the store's DDL.
    if privileged:
        raise _RefusedError(StoreFailure.PRIVILEGED_PRINCIPAL)
    if not can_create:
        raise _RefusedError(StoreFailure.SCHEMA_NOT_WRITABLE)


async def initialise_store(
    *,
    tenant_id: str,
    connection: str,
    secrets: SecretStore,
    allowlist: HostAllowlist,
    audit: AuditSink,
    clock: Clock,
    schema: str = DEFAULT_STORE_SCHEMA,
    text_search_config: str = DEFAULT_TEXT_SEARCH_CONFIG,
    source_id: str = "document_store",
    scope_claim: str = DEFAULT_SCOPE_CLAIM,
    search_connection: str | None = None,
    correlation_id: str | None = None,
    connect_timeout_s: float = 10.0,
    on_state: Callable[[StoreState], None] | None = None,
) -> StoreInitialisation:
    """Initialise the store for ``tenant_id``; return Ready (with its source) or Failed.

    Args:
        connection: the store principal's connection template, e.g.
            ``postgresql://esra_store:${secret:store-pw}@db.internal:5432/esra``.
        schema: the store's own schema; created if the principal may.
        text_search_config: the ``regconfig`` segments are indexed with (the provider
            searching the store must bind the same one).
        source_id: the synthetic source's id.
        scope_claim: the caller claim holding the document scopes a caller may read.
        search_connection: the template the registered source searches with (a read-only
            principal is better); the store's own by default.
        on_state: called with each state as it is entered (for a Portal to poll).

    Never raises for a refusal or a database failure: those come back as Failed, audited.

    Raises:
        ValueError: if ``schema`` is not a plain lowercase identifier, or ``scope_claim`` is
            empty or reserved (``esra.``).
    """
    store_schema_statements(schema, text_search_config)  # rejects a bad schema name early
    check_scope_claim(scope_claim)  # and a reserved scope claim, before any DDL
    correlation = correlation_id or f"store-init-{uuid.uuid4().hex}"
    base = {"tenant_id": tenant_id, "correlation_id": correlation, "schema": schema}

    async def enter(
        state: StoreState, reason: str | None = None, version: int | None = None
    ) -> None:
        if on_state is not None:
            on_state(state)
        await _audit(audit, clock, state=state, reason=reason, version=version, **base)

    await enter(StoreState.INITIALIZING)
    applied = False
    version = 0
    try:
        target = await resolve_connection(
            connection,
            tenant_id=tenant_id,
            secrets=secrets,
            allowlist=allowlist,
            schemes=SCHEMES,
            private_file_options=PRIVATE_FILE_OPTIONS,
        )
        kwargs = connect_kwargs(target, connect_timeout_s=connect_timeout_s)
        kwargs["application_name"] = "esra-store-init"
        async with await psycopg.AsyncConnection.connect(**kwargs) as conn:
            await _check_principal(conn, schema)
            applied = await apply_store_schema(conn, schema, text_search_config)
            version = await store_schema_version(conn, schema)
    except _RefusedError as refused:
        return await _failed(enter, refused.reason, schema, text_search_config)
    except ProviderError as exc:
        return await _failed(enter, exc.code.value, schema, text_search_config)
    except StoreSchemaConflictError:
        return await _failed(enter, StoreFailure.SCHEMA_CONFLICT, schema, text_search_config)
    except psycopg.Error as exc:
        code = classify(exc)
        _log.warning("store initialisation failed as %s: %s", code.value, exc)
        return await _failed(enter, code.value, schema, text_search_config)
    source = store_source(tenant_id, search_connection or connection, source_id=source_id)
    mapping = store_mapping(tenant_id, source_id=source_id, schema=schema, scope_claim=scope_claim)
    await enter(StoreState.READY, version=version)
    return StoreInitialisation(
        state=StoreState.READY,
        schema=schema,
        text_search_config=text_search_config,
        schema_version=version,
        applied=applied,
        source=source,
        mapping=mapping,
    )


async def _failed(
    enter: Callable[..., Any], reason: str, schema: str, config: str
) -> StoreInitialisation:
    reason, remedy = _failure(reason)
    await enter(StoreState.FAILED, reason=reason)
    return StoreInitialisation(
        state=StoreState.FAILED,
        schema=schema,
        text_search_config=config,
        reason=str(reason),
        remedy=remedy,
    )


class StoreInitJob:
    """Initialisation as a background task: start it, poll ``state``, await ``wait()``.

    DDL against a cold database can outlast any HTTP timeout, so a Portal request starts the
    job and returns at once; the Portal shows Initializing and polls.
    """

    def __init__(self) -> None:
        self._state = StoreState.INITIALIZING
        self._task: asyncio.Task[StoreInitialisation] | None = None

    @classmethod
    def start(cls, **options: Any) -> StoreInitJob:
        """Start ``initialise_store(**options)`` on the running loop and return the job."""
        job = cls()
        caller_hook = options.pop("on_state", None)

        def track(state: StoreState) -> None:
            job._state = state
            if caller_hook is not None:
                caller_hook(state)

        job._task = asyncio.create_task(initialise_store(on_state=track, **options))
        return job

    @property
    def state(self) -> StoreState:
        """Initializing until the job finishes, then Ready or Failed."""
        return self._state

    @property
    def done(self) -> bool:
        """Whether the job has finished."""
        return self._task is not None and self._task.done()

    async def wait(self) -> StoreInitialisation:
        """Wait for the outcome."""
        assert self._task is not None
        return await self._task
