"""esra.sqlite.store_source: the core's store source with SQLite's ids, kind and FTS5 table."""

from __future__ import annotations

import pytest

from esra.core import docstore as shared
from esra.core._docstore.store_schema import SEARCHABLE_VIEW, STORE_SCHEMA_VERSION
from esra.sqlite import DEFAULT_SCOPE_CLAIM, STORE_PROVIDER_KIND, store_source
from esra.sqlite._docstore_schema import SEGMENTS_FTS, store_schema_statements


def test_the_defaults_embedders_call_with_are_kept() -> None:
    """Source and mapping ids, provider kind and connection are SQLite's as before."""
    source, mapping = store_source("acme")
    assert (source.id, source.provider_kind, source.connection_ref) == (
        "internal-documents",
        STORE_PROVIDER_KIND,
        "document-store",
    )
    assert (mapping.id, mapping.source_id) == ("internal-documents-segments", source.id)
    assert (mapping.relation, mapping.text_index, mapping.schema) == (
        SEARCHABLE_VIEW,
        SEGMENTS_FTS,
        None,
    )
    assert DEFAULT_SCOPE_CLAIM is shared.DEFAULT_SCOPE_CLAIM


def test_it_is_the_core_builder_with_sqlite_parts() -> None:
    """Nothing of the source or mapping is SQLite's own beyond what it passes."""
    source, mapping = store_source("acme", source_id="docs", scope_claim="groups", name="HR")
    assert source == shared.store_source(
        "acme",
        source_id="docs",
        provider_kind=STORE_PROVIDER_KIND,
        connection_ref="document-store",
        name="HR",
    )
    assert mapping == shared.store_mapping(
        "acme", source_id="docs", text_index=SEGMENTS_FTS, scope_claim="groups"
    )


def test_a_reserved_scope_claim_is_refused() -> None:
    """The core's refusal, through the SQLite entry point."""
    with pytest.raises(ValueError, match="reserved"):
        store_source("acme", scope_claim="esra.tenant_id")


def test_the_migrations_reach_the_shared_schema_version() -> None:
    """The SQLite DDL brings the store to exactly the version every engine is at."""
    store_schema_statements(STORE_SCHEMA_VERSION)
    with pytest.raises(KeyError):
        store_schema_statements(STORE_SCHEMA_VERSION + 1)
