"""Store kind ``postgres-document-store`` opened through the registries, on a real server.

Opening connects to nothing; ``schema_present()`` reports a store it cannot reach as not
Ready instead of raising; ``initialise()`` is ``initialise_store`` with its refusals turned
into the lifecycle's classified ``StoreInitialisationError``; and the provider factory of the
same kind refuses a mapping outside the store's schema.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import attrs
import pytest
from psycopg import sql

from esra.core._docstore.lifecycle import StoreInitialisationError
from esra.core._docstore.store_registry import DocumentStoreRegistry, StoreRequest
from esra.core._provider_registry import ProviderOptionError, ProviderRegistry, ProviderRequest
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemorySecretStore, StaticHostAllowlist
from esra.postgres._store_factory import postgres_store_source
from tests.postgres.conftest import admin, host_port

pytestmark = pytest.mark.postgres

TENANT = "acme"


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    name = f"esra_test_storefactory_{uuid.uuid4().hex[:12]}"
    yield name
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _request(pg_dsn: str, schema: str, *, allowed: bool = True) -> StoreRequest:
    source, mapping = postgres_store_source(TENANT, pg_dsn, schema=schema)
    host, port = host_port(pg_dsn)
    return StoreRequest(
        source=source,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(TENANT, host, port)] if allowed else []),
        mappings=(mapping,),
        options={"schema": schema},
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )


async def test_a_superuser_principal_is_refused_and_the_store_stays_absent(
    pg_dsn: str, schema: str
) -> None:
    """The test server's own principal is a superuser: refused, classified, nothing created."""
    request = _request(pg_dsn, schema)
    store = await DocumentStoreRegistry.from_entry_points().open(request)
    try:
        assert not await store.schema_present()
        with pytest.raises(StoreInitialisationError) as refused:
            await store.initialise()
        assert refused.value.reason == "SUPERUSER_PRINCIPAL"
        assert "dedicated role" in refused.value.remedy
        assert not await store.schema_present()
    finally:
        await store.close()
    assert isinstance(request.audit, InMemoryAuditSink)
    states = [r.dimensions.get("state") for r in request.audit.records]
    assert states == ["initializing", "failed"]
    assert str(store.location).endswith(f"(schema {schema})")
    assert "postgres@" not in str(store.location)  # the principal is not part of it


async def test_a_host_outside_the_allowlist_is_not_ready_and_refused(
    pg_dsn: str, schema: str
) -> None:
    store = await DocumentStoreRegistry.from_entry_points().open(
        _request(pg_dsn, schema, allowed=False)
    )
    try:
        assert not await store.schema_present()
        with pytest.raises(StoreInitialisationError) as refused:
            await store.initialise()
        assert refused.value.reason == "HOST_NOT_ALLOWED"
    finally:
        await store.close()


async def test_the_search_provider_refuses_a_mapping_outside_the_store_schema(
    pg_dsn: str, schema: str
) -> None:
    request = _request(pg_dsn, schema)
    registry = ProviderRegistry.from_entry_points()
    provider_request = ProviderRequest(
        source=request.source,
        secrets=request.secrets,
        allowlist=request.allowlist,
        mappings=request.mappings,
        options={"schema": "elsewhere"},
    )
    with pytest.raises(ProviderOptionError, match="reads schema"):
        registry.open(provider_request)
    opened = registry.open(attrs.evolve(provider_request, options={"schema": schema}))
    await opened.close()
