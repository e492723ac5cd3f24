"""The document-store registry: one factory per store kind, filled from entry points."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import attrs
import pytest

from esra.core._docstore.lifecycle import StoreInitialisationError
from esra.core._docstore.store_registry import (
    DocumentStoreRegistry,
    DuplicateStoreKindError,
    OpenedStore,
    StoreRequest,
    UnknownStoreKindError,
    installed_store_kinds,
)
from esra.core._provider_registry import ProviderOptionError, installed_provider_kinds
from esra.core.codes import ErrorCode
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.core.testing._docstore import InMemoryDocumentRepository
from tests.core.factories import make_source

GROUP = "esra.document_stores"


class Recorder:
    """A factory recording what it opened and closed."""

    def __init__(self) -> None:
        self.opened: list[StoreRequest] = []
        self.closed: list[str] = []

    async def __call__(self, request: StoreRequest) -> OpenedStore:
        self.opened.append(request)

        async def initialise() -> None:
            return None

        async def present() -> bool:
            return True

        async def close() -> None:
            self.closed.append(request.source.id)

        return OpenedStore(
            repository=InMemoryDocumentRepository(),
            initialise=initialise,
            schema_present=present,
            close=close,
            location=f"memory:{request.source.id}",
        )


def _request(kind: str, databases: Path | None = None, **options: object) -> StoreRequest:
    source = attrs.evolve(make_source("store", tenant_id="tenant-a"), provider_kind=kind)
    return StoreRequest(
        source=source,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist(),
        databases=databases,
        options=options,
    )


async def test_an_unknown_kind_is_a_classified_error_naming_the_installed_kinds() -> None:
    registry = DocumentStoreRegistry({"sqlite-document-store": Recorder(), "pg-store": Recorder()})
    with pytest.raises(UnknownStoreKindError) as refused:
        await registry.open(_request("cassandra-store"))
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert refused.value.installed == ("pg-store", "sqlite-document-store")
    assert "'cassandra-store'" in str(refused.value)
    assert "installed store kinds: pg-store, sqlite-document-store" in str(refused.value)
    with pytest.raises(UnknownStoreKindError, match="installed store kinds: none"):
        DocumentStoreRegistry().require("sqlite-document-store")


async def test_a_registered_factory_opens_with_the_request_it_was_given() -> None:
    factory = Recorder()
    registry = DocumentStoreRegistry({"memory-store": factory})
    opened = await registry.open(_request("memory-store", pool_size=2))
    assert factory.opened[0].options == {"pool_size": 2}
    assert opened.location == "memory:store"
    assert await opened.schema_present()
    await opened.close()
    assert factory.closed == ["store"]


async def test_a_factory_returning_something_else_is_refused() -> None:
    async def wrong(request: StoreRequest) -> object:
        return request

    registry = DocumentStoreRegistry({"odd": wrong})  # type: ignore[dict-item]
    with pytest.raises(ProviderOptionError, match="did not return an OpenedStore"):
        await registry.open(_request("odd"))


def test_a_kind_registered_twice_or_empty_is_refused() -> None:
    registry = DocumentStoreRegistry({"memory-store": Recorder()})
    with pytest.raises(DuplicateStoreKindError) as refused:
        registry.register("memory-store", Recorder())
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    with pytest.raises(ProviderOptionError, match="non-empty"):
        registry.register(" ", Recorder())
    assert registry.kinds == {"memory-store"}


def _entry(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=GROUP)


def test_two_distributions_claiming_one_kind_are_refused() -> None:
    points = [
        _entry("sqlite-document-store", "esra.sqlite._docstore_factory:open_sqlite_store"),
        _entry("sqlite-document-store", "esra.postgres._store_factory:open_postgres_store"),
    ]
    with pytest.raises(DuplicateStoreKindError, match="registered twice"):
        DocumentStoreRegistry.from_entry_points(entry_points=points)
    value = "esra.sqlite._docstore_factory:open_sqlite_store"
    once = DocumentStoreRegistry.from_entry_points(
        entry_points=[_entry("sqlite-document-store", value)] * 2
    )
    assert once.kinds == {"sqlite-document-store"}


def test_an_entry_point_that_is_not_a_factory_is_refused() -> None:
    point = _entry("constant", "esra.postgres._store_factory:POSTGRES_STORE_KIND")
    with pytest.raises(ProviderOptionError, match="not a document-store factory"):
        DocumentStoreRegistry.from_entry_points(entry_points=[point])


def test_each_store_kind_is_also_a_searchable_provider_kind() -> None:
    """esra-sqlite and esra-postgres register their store kinds in both groups: a store is
    written through one registry and searched through the other."""
    kinds = {"sqlite-document-store", "postgres-document-store"}
    assert kinds <= installed_store_kinds()
    assert kinds <= DocumentStoreRegistry.from_entry_points().kinds
    assert kinds <= installed_provider_kinds()


async def test_the_sqlite_store_creates_nothing_until_initialised(tmp_path: Path) -> None:
    registry = DocumentStoreRegistry.from_entry_points()
    request = _request("sqlite-document-store", databases=tmp_path)
    request = attrs.evolve(request, source=attrs.evolve(request.source, connection_ref="s.db"))
    opened = await registry.open(request)
    try:
        assert opened.location == (tmp_path / "s.db").resolve()
        assert not await opened.schema_present()
        assert not (tmp_path / "s.db").exists()
        await opened.initialise()
        assert await opened.schema_present()
    finally:
        await opened.close()


async def test_an_unwritable_sqlite_store_fails_initialisation_classified(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"not a database, only quokka notes" * 64)
    request = _request("sqlite-document-store", databases=tmp_path)
    request = attrs.evolve(request, source=attrs.evolve(request.source, connection_ref="s.db"))
    opened = await DocumentStoreRegistry.from_entry_points().open(request)
    try:
        with pytest.raises(StoreInitialisationError) as failed:
            await opened.initialise()
        assert failed.value.reason == "database_unavailable"
        assert "writable" in failed.value.remedy
    finally:
        await opened.close()


async def test_store_factories_refuse_unknown_options_and_escaping_files(tmp_path: Path) -> None:
    registry = DocumentStoreRegistry.from_entry_points()
    with pytest.raises(ProviderOptionError, match="'schemas' is not an option") as refused:
        await registry.open(_request("postgres-document-store", schemas="x"))
    assert "text_search_config" in str(refused.value)
    with pytest.raises(ProviderOptionError, match="must be a str"):
        await registry.open(_request("postgres-document-store", schema=3))
    with pytest.raises(ProviderOptionError, match="no databases directory"):
        await registry.open(_request("sqlite-document-store"))
    escaping = _request("sqlite-document-store", databases=tmp_path)
    escaping = attrs.evolve(
        escaping, source=attrs.evolve(escaping.source, connection_ref="../elsewhere.db")
    )
    with pytest.raises(ProviderOptionError, match="outside"):
        await registry.open(escaping)
