"""A plain ``sqlite`` source never reads one of ESRA's own SQLite files.

A served tenant's document store file lives in the tenant's ``databases`` directory, the
same directory its plain ``sqlite`` sources name their files in, and those sources are
configuration an ``ESRA_DATA_MANAGE`` holder writes through the admin API. Without this
rule such a source over the store's file, mapped onto ``documents`` with no record filter,
searched every tenant's quarantined, failed and deleted text there — the isolation the
store's own kind enforces (``store_isolation_problem``) bypassed by choosing another kind.
The state database (configuration, audit, secrets) is ESRA's in the same way. So the
``sqlite`` kind refuses any file holding one of ESRA's schemas, at each connection, whenever
the file was created; ``sqlite-document-store`` still opens its own file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest

from esra.core._config.mapping import FieldSpec, Mapping
from esra.core._config.source import Source
from esra.core._provider_registry import ProviderRegistry, ProviderRequest
from esra.core.codes import ProviderErrorCode
from esra.core.config import SourceHealth
from esra.core.exceptions import ProviderError
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.sqlite import (
    SqliteAuditLog,
    SqliteConfigStore,
    SqliteDocumentRepository,
    SqliteSecretTable,
    store_source,
)
from esra.sqlite._esra_files import esra_schema_of
from esra.sqlite._provider import SqliteFts5Provider

TENANT = "acme"


async def _store_file(path: Path) -> None:
    repository = SqliteDocumentRepository(path)
    await repository.initialize()
    await repository.close()


async def _config_file(path: Path) -> None:
    store = SqliteConfigStore(path)
    await store.initialize()
    await store.close()


async def _audit_file(path: Path) -> None:
    log = SqliteAuditLog(path)
    await log.initialize()
    await log.close()


async def _secrets_file(path: Path) -> None:
    table = SqliteSecretTable(path)
    await table.initialize()
    await table.close()


ESRA_FILES: dict[str, Callable[[Path], Awaitable[None]]] = {
    "document store": _store_file,
    "configuration": _config_file,
    "audit log": _audit_file,
    "secrets": _secrets_file,
}


def _plain_source(connection_ref: str) -> tuple[Source, Mapping]:
    """A data manager's ``sqlite`` source over ``connection_ref``: the store's mapping moved
    onto ``documents``, with no record filter."""
    source, mapping = store_source(
        TENANT, source_id="documents-raw", connection_ref=connection_ref, provider_kind="sqlite"
    )
    fields = (*mapping.fields, FieldSpec("text", "text", is_searchable=True))
    return source, attrs.evolve(mapping, relation="documents", fields=fields, record_filters=())


def _open(source: Source, mapping: Mapping, databases: Path) -> SqliteFts5Provider:
    request = ProviderRequest(
        source=source,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist(),
        mappings=(mapping,),
        databases=databases,
    )
    opened = ProviderRegistry.from_entry_points().open(request)
    assert isinstance(opened.provider, SqliteFts5Provider)
    return opened.provider


async def _refusal(provider: SqliteFts5Provider) -> object:
    """How a connection to the provider's file is refused (``health`` only reports it)."""
    try:
        # The engine directly: health() reports a refusal only as UNAVAILABLE.
        await provider._engine.readiness(())
    except ProviderError as exc:
        return exc.code
    return None


@pytest.mark.parametrize("kind", sorted(ESRA_FILES))
async def test_each_of_esras_files_is_recognised(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "esra.db"
    await ESRA_FILES[kind](path)
    with contextlib.closing(sqlite3.connect(path)) as raw:
        assert esra_schema_of(raw) == kind


async def test_a_customer_file_is_not_taken_for_esras(tmp_path: Path) -> None:
    """Table names alone do not decide: a customer's own ``audit_records`` is searchable."""
    path = tmp_path / "crm.db"
    with contextlib.closing(sqlite3.connect(path)) as raw:
        raw.execute("CREATE TABLE audit_records (id INTEGER PRIMARY KEY, text TEXT)")
        raw.execute("CREATE TABLE store_documents (id INTEGER PRIMARY KEY)")
        assert esra_schema_of(raw) is None


@pytest.mark.parametrize("kind", sorted(ESRA_FILES))
async def test_a_plain_sqlite_source_over_an_esra_file_is_refused(
    tmp_path: Path, kind: str
) -> None:
    await ESRA_FILES[kind](tmp_path / "esra.db")
    source, mapping = _plain_source("esra.db")
    provider = _open(source, mapping, tmp_path)
    try:
        assert await _refusal(provider) is ProviderErrorCode.PERMISSION_DENIED
        assert await provider.health() is SourceHealth.UNAVAILABLE
    finally:
        provider.close()


async def test_a_file_that_becomes_a_store_after_the_source_opened_is_refused(
    tmp_path: Path,
) -> None:
    """The check runs at each connection, not once when the source opens: a store
    initialised later at the path a plain source names is refused all the same."""
    source, mapping = _plain_source("later.db")
    provider = _open(source, mapping, tmp_path)
    try:
        await _store_file(tmp_path / "later.db")
        assert await _refusal(provider) is ProviderErrorCode.PERMISSION_DENIED
    finally:
        provider.close()


async def test_the_store_kind_still_opens_its_own_file(tmp_path: Path) -> None:
    await _store_file(tmp_path / "store.db")
    source, mapping = store_source(TENANT, connection_ref="store.db")
    request = ProviderRequest(
        source=source,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist(),
        mappings=(mapping,),
        databases=tmp_path,
    )
    opened = ProviderRegistry.from_entry_points().open(request)
    try:
        assert await opened.provider.health() is SourceHealth.HEALTHY
    finally:
        await opened.close()
