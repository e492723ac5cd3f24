"""A document store is searched only through a mapping that keeps tenants and scopes apart.

Spec 004: tenant isolation and the document-scope record filter are "always enforced in the
query itself, and neither can be disabled". They are the two record filters of the store's
mapping, and that mapping is the tenant's configuration, which an ``ESRA_DATA_MANAGE``
holder edits through the admin API; tenants whose PostgreSQL stores are one database share
its tables. A mapping without the tenant filter would search every tenant's documents, and
one over ``documents`` instead of ``searchable_segments`` every quarantined, failed and
deleted one. So each engine's store provider refuses to open over such a mapping — the
source is then unavailable, failing closed — and opens over the one its engine writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from esra.core._config.mapping import FieldSpec, Mapping, Operator, RecordFilter
from esra.core._config.source import Source
from esra.core._provider_registry import ProviderOptionError, ProviderRegistry, ProviderRequest
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.postgres._store_factory import postgres_store_source
from esra.sqlite._docstore_source import store_source as sqlite_store_source

TENANT = "acme"
SCHEMA = "esra_store"
TEMPLATE = "postgresql://esra_store:${secret:env:STORE_PASSWORD}@db.internal:5432/esra"

Opener = Callable[[Mapping], None]


def _opener(source: Source, tmp_path: Path, options: dict[str, object]) -> Opener:
    def open_with(mapping: Mapping) -> None:
        request = ProviderRequest(
            source=source,
            secrets=InMemorySecretStore(),
            allowlist=StaticHostAllowlist(),
            mappings=(mapping,),
            options=options,
            databases=tmp_path,
        )
        # Connects to nothing: both providers open their connections lazily.
        ProviderRegistry.from_entry_points().open(request)

    return open_with


@pytest.fixture(params=["postgres", "sqlite"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Mapping, Opener]:
    """The engine's own store mapping, and how its store provider is opened over a mapping."""
    if request.param == "postgres":
        source, mapping = postgres_store_source(TENANT, TEMPLATE, schema=SCHEMA)
        return mapping, _opener(source, tmp_path, {"schema": SCHEMA})
    source, mapping = sqlite_store_source(TENANT)
    return mapping, _opener(source, tmp_path, {})


def _filters(mapping: Mapping, *filters: RecordFilter) -> Mapping:
    return attrs.evolve(mapping, record_filters=filters)


def test_the_engines_own_store_mapping_opens(engine: tuple[Mapping, Opener]) -> None:
    mapping, open_with = engine
    open_with(mapping)


def test_a_stricter_store_mapping_still_opens(engine: tuple[Mapping, Opener]) -> None:
    """An extra record filter only narrows what a caller sees."""
    mapping, open_with = engine
    extra = RecordFilter(field="format", claim="formats", operator=Operator.IN)
    open_with(_filters(mapping, *mapping.record_filters, extra))


def _without_tenant(mapping: Mapping) -> Mapping:
    return _filters(mapping, *(f for f in mapping.record_filters if f.field != "tenant"))


def _without_scope(mapping: Mapping) -> Mapping:
    return _filters(mapping, *(f for f in mapping.record_filters if f.field != "scope"))


def _scope_excluding(mapping: Mapping) -> Mapping:
    filters = mapping.record_filters
    return _filters(
        mapping,
        *(attrs.evolve(f, operator=Operator.NE) if f.field == "scope" else f for f in filters),
    )


def _scope_on_reserved_claim(mapping: Mapping) -> Mapping:
    """A claim no caller carries binds to what the core sets, never to a caller's scopes."""
    filters = mapping.record_filters
    return _filters(
        mapping,
        *(attrs.evolve(f, claim="esra.tenant_id") if f.field == "scope" else f for f in filters),
    )


def _tenant_from_the_caller(mapping: Mapping) -> Mapping:
    """The tenant must be the invocation's (the reserved claim), never one a caller sends."""
    filters = mapping.record_filters
    return _filters(
        mapping, *(attrs.evolve(f, claim="tenant") if f.field == "tenant" else f for f in filters)
    )


def _tenant_field_on_another_column(mapping: Mapping) -> Mapping:
    """The filters keep their names, but ``tenant`` now reads a column every row matches."""
    fields = tuple(
        attrs.evolve(f, column="scope") if f.name == "tenant" else f for f in mapping.fields
    )
    return attrs.evolve(mapping, fields=fields)


def _over_the_documents_table(mapping: Mapping) -> Mapping:
    """``documents`` holds Pending, Quarantined, Failed and deleted documents' text too."""
    fields = (*mapping.fields, FieldSpec("text", "text", is_searchable=True))
    return attrs.evolve(mapping, relation="documents", fields=fields)


LOOSENED: dict[str, tuple[Callable[[Mapping], Mapping], str]] = {
    "no tenant filter": (_without_tenant, "tenant"),
    "no scope filter": (_without_scope, "scope"),
    "a scope filter that excludes": (_scope_excluding, "scope"),
    "a scope filter on a reserved claim": (_scope_on_reserved_claim, "scope"),
    "a tenant filter bound to a caller claim": (_tenant_from_the_caller, "tenant"),
    "a tenant field on another column": (_tenant_field_on_another_column, "tenant"),
    "the documents table": (_over_the_documents_table, "searchable_segments"),
}


@pytest.mark.parametrize("case", sorted(LOOSENED))
def test_a_store_mapping_that_loosens_isolation_is_refused(
    engine: tuple[Mapping, Opener], case: str
) -> None:
    mapping, open_with = engine
    loosen, named = LOOSENED[case]
    with pytest.raises(ProviderOptionError, match=named):
        open_with(loosen(mapping))
