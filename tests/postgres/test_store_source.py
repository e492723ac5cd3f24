"""esra.postgres's store source: the core's, with PostgreSQL's ids, kinds, schema and tsvector.

No database: these build values only (and refuse before connecting).
"""

from __future__ import annotations

import pytest

from esra.core import docstore as shared
from esra.core._config.mapping import Operator
from esra.core._docstore.store_schema import SEARCHABLE_VIEW, STORE_SCHEMA_VERSION
from esra.core.testing import FakeClock, InMemoryAuditSink, InMemorySecretStore, StaticHostAllowlist
from esra.postgres import (
    DEFAULT_SCOPE_CLAIM,
    DEFAULT_STORE_SCHEMA,
    initialise_store,
    store_mapping,
    store_source,
)
from esra.postgres._store_factory import POSTGRES_STORE_KIND, postgres_store_source
from esra.postgres._store_schema import store_schema_migrations


def test_the_mapping_keeps_postgres_ids_and_physical_parts() -> None:
    """``<source>_segments`` over ``<schema>.searchable_segments`` on the ``tsv`` column."""
    mapping = store_mapping("acme")
    assert (mapping.id, mapping.source_id) == ("document_store_segments", "document_store")
    assert (mapping.relation, mapping.schema, mapping.text_index) == (
        SEARCHABLE_VIEW,
        DEFAULT_STORE_SCHEMA,
        "tsv",
    )
    section = mapping.field("section")
    assert section is not None
    assert section.column == "label"
    assert DEFAULT_SCOPE_CLAIM is shared.DEFAULT_SCOPE_CLAIM


def test_results_and_plans_keep_what_postgres_stores_always_had() -> None:
    """The document field is ``document``, ``format`` takes EQ and IN, ``updated`` stays
    unreturned: those change results or accepted plans, so they are not unified silently."""
    mapping = store_mapping("acme")
    document, fmt, updated = (mapping.field(n) for n in ("document", "format", "updated"))
    assert document is not None
    assert document.column == "document_id"
    assert fmt is not None
    assert fmt.allowed_operators == frozenset({Operator.EQ, Operator.IN})
    assert updated is not None
    assert not updated.is_returnable


def test_the_sources_keep_their_provider_kinds() -> None:
    """``postgres`` for the initialised store, the store kind for a configured one."""
    assert store_source("acme", "postgresql://h/db").provider_kind == "postgres"
    source, mapping = postgres_store_source("acme", "postgresql://h/db", schema="docs")
    assert (source.provider_kind, source.id, mapping.schema) == (
        POSTGRES_STORE_KIND,
        "document_store",
        "docs",
    )
    assert mapping == store_mapping("acme", schema="docs")


def test_a_reserved_scope_claim_is_refused_by_every_entry_point() -> None:
    """Mapping and configured source refuse it as the core does."""
    with pytest.raises(ValueError, match="reserved"):
        store_mapping("acme", scope_claim="esra.tenant_id")
    with pytest.raises(ValueError, match="reserved"):
        postgres_store_source("acme", "postgresql://h/db", scope_claim="esra.scopes")


async def test_initialisation_refuses_a_reserved_scope_claim_before_connecting() -> None:
    """Refused before any DDL or audit, like a bad schema name (the host is not allowed)."""
    audit = InMemoryAuditSink()
    with pytest.raises(ValueError, match="reserved"):
        await initialise_store(
            tenant_id="acme",
            connection="postgresql://store@127.0.0.1:1/db",
            secrets=InMemorySecretStore({}),
            allowlist=StaticHostAllowlist([]),
            audit=audit,
            clock=FakeClock(),
            scope_claim="esra.tenant_id",
        )
    assert audit.records == []


def test_the_migrations_reach_the_shared_schema_version() -> None:
    """The PostgreSQL DDL brings the store to exactly the version every engine is at."""
    assert max(store_schema_migrations(DEFAULT_STORE_SCHEMA, "english")) == STORE_SCHEMA_VERSION
