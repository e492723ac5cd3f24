"""The provider registry: one factory per ``provider_kind``, filled from entry points."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import attrs
import pytest

from esra.core._opened_providers import OpenedProviders
from esra.core._outbound_allowlist import ConfiguredHostAllowlist, parse_host_port
from esra.core._provider_registry import (
    DuplicateProviderKindError,
    OpenedProvider,
    ProviderOptionError,
    ProviderRegistry,
    ProviderRequest,
    UnknownProviderKindError,
    installed_provider_kinds,
)
from esra.core.codes import ErrorCode
from esra.core.exceptions import ConfigurationError
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.core.testing._provider import InMemorySearchProvider
from tests.core.factories import make_source

GROUP = "esra.providers"


class Recorder:
    """A factory recording what it opened and closed."""

    def __init__(self) -> None:
        self.opened: list[ProviderRequest] = []
        self.closed: list[str] = []

    def __call__(self, request: ProviderRequest) -> OpenedProvider:
        self.opened.append(request)

        async def close() -> None:
            self.closed.append(request.source.id)

        return OpenedProvider(InMemorySearchProvider({}), close)


def _request(kind: str, source_id: str = "s-1", **options: object) -> ProviderRequest:
    source = attrs.evolve(make_source(source_id, tenant_id="tenant-a"), provider_kind=kind)
    return ProviderRequest(
        source=source,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist(),
        options=options,
    )


def test_an_unknown_kind_is_a_classified_error_naming_the_installed_kinds() -> None:
    registry = ProviderRegistry({"postgres": Recorder(), "sqlite": Recorder()})
    with pytest.raises(UnknownProviderKindError) as refused:
        registry.open(_request("cassandra"))
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert refused.value.installed == ("postgres", "sqlite")
    assert "'cassandra'" in str(refused.value)
    assert "installed kinds: postgres, sqlite" in str(refused.value)


def test_a_kind_registered_twice_is_refused() -> None:
    registry = ProviderRegistry({"postgres": Recorder()})
    with pytest.raises(DuplicateProviderKindError) as refused:
        registry.register("postgres", Recorder())
    assert refused.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
    assert registry.kinds == {"postgres"}


def _entry(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=GROUP)


def test_two_distributions_claiming_one_kind_are_refused() -> None:
    points = [
        _entry("postgres", "esra.postgres._factory:open_postgres_provider"),
        _entry("postgres", "esra.sqlite._factory:open_sqlite_provider"),
    ]
    with pytest.raises(DuplicateProviderKindError, match="'postgres' is registered twice"):
        ProviderRegistry.from_entry_points(entry_points=points)


def test_one_entry_point_seen_twice_is_one_registration() -> None:
    """Metadata found on two paths names the same factory: not a conflict."""
    value = "esra.sqlite._factory:open_sqlite_provider"
    registry = ProviderRegistry.from_entry_points(
        entry_points=[_entry("sqlite", value), _entry("sqlite", value)]
    )
    assert registry.kinds == {"sqlite"}


def test_every_adapter_distribution_registers_its_kinds() -> None:
    """The installed distributions fill the registry through their entry points."""
    expected = {"sqlite", "sqlite-document-store", "postgres", "mysql", "mariadb"}
    expected |= {"sqlserver", "oracle"}
    assert expected <= installed_provider_kinds()
    assert expected <= ProviderRegistry.from_entry_points().kinds


def test_a_factory_refuses_an_unknown_option_naming_its_options() -> None:
    registry = ProviderRegistry.from_entry_points()
    request = _request("postgres", pool_sise=2)
    with pytest.raises(ProviderOptionError, match="'pool_sise' is not an option") as refused:
        registry.open(request)
    assert "pool_size" in str(refused.value)
    with pytest.raises(ProviderOptionError, match="'pool_size' must be a int"):
        registry.open(_request("mysql", pool_size="four"))
    with pytest.raises(ProviderOptionError, match="must be positive"):
        registry.open(_request("oracle", pool_size=0))
    with pytest.raises(ProviderOptionError, match="no databases directory"):
        registry.open(_request("sqlite"))


def test_a_sqlite_file_outside_the_databases_directory_is_refused(tmp_path: Path) -> None:
    request = _request("sqlite")
    source = attrs.evolve(request.source, connection_ref="../x.db")
    escaping = ProviderRequest(
        source=source, secrets=request.secrets, allowlist=request.allowlist, databases=tmp_path
    )
    with pytest.raises(ProviderOptionError, match="outside"):
        ProviderRegistry.from_entry_points().open(escaping)


async def test_opened_providers_close_once_and_a_retired_source_is_closed() -> None:
    factory = Recorder()
    providers = OpenedProviders(ProviderRegistry({"fake": factory}))
    providers.open(_request("fake", "s-1"))
    providers.open(_request("fake", "s-2"))
    with pytest.raises(ValueError, match="already open"):
        providers.open(_request("fake", "s-1"))
    assert await providers.retire("tenant-a", "s-1")
    assert factory.closed == ["s-1"]
    assert set(providers.by_tenant["tenant-a"]) == {"s-2"}
    assert not await providers.retire("tenant-a", "s-1")
    await providers.aclose()
    await providers.aclose()
    assert factory.closed == ["s-1", "s-2"]


async def test_the_outbound_allowlist_is_per_tenant_and_needs_a_port() -> None:
    allowlist = ConfiguredHostAllowlist({"tenant-a": ["DB.internal:5432", "[::1]:3306"]})
    assert await allowlist.is_allowed("tenant-a", "db.internal", 5432)
    assert await allowlist.is_allowed("tenant-a", "::1", 3306)
    assert not await allowlist.is_allowed("tenant-a", "db.internal", 5433)
    assert not await allowlist.is_allowed("tenant-b", "db.internal", 5432)
    for bad in ("db.internal", "db.internal:0", "db.internal:99999", ":5432", "a b:1"):
        with pytest.raises(ConfigurationError, match="host:port"):
            parse_host_port(bad)
