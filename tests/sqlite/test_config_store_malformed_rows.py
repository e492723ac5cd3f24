"""Configuration rows edited by hand: refused, classified, never served as something else.

Whoever can write the state database can put anything in a row. A workspace or publication
that does not read back must fail closed with ``ConfigurationError``
(``ESRA_CONFIGURATION_INVALID``) rather than an unclassified ``JSONDecodeError`` or
``KeyError`` (``ESRA_INTERNAL`` for every invocation and admin request of the tenant).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from esra.core.exceptions import ConfigurationError
from esra.sqlite._config_store import SqliteConfigStore

TENANT = "tenant-a"
AT = "2026-01-01T00:00:00.000000+00:00"

MALFORMED_WORKSPACES = [
    pytest.param("not json", id="not-json"),
    pytest.param('{"format": 1}', id="missing-keys"),
    pytest.param("[]", id="not-an-object"),
    pytest.param('{"format": 1, "secret_rotations": {}}', id="no-tenant"),
    pytest.param(
        '{"format": 1, "secret_rotations": {}, "tenant_id": "tenant-a", "version": "x",'
        ' "snapshot": {}}',
        id="version-not-a-number",
    ),
    pytest.param(
        '{"format": 1, "secret_rotations": {"r": "x"}, "tenant_id": "tenant-a", "version": 1,'
        ' "snapshot": {}}',
        id="rotation-not-a-number",
    ),
]
MALFORMED_SNAPSHOTS = [
    pytest.param("not json", id="not-json"),
    pytest.param("{}", id="empty-object"),
    pytest.param('"text"', id="a-string"),
]


async def _store_with(path: Path, statement: str, params: tuple[object, ...]) -> SqliteConfigStore:
    store = SqliteConfigStore(path)
    await store.initialize()
    with sqlite3.connect(path) as conn:
        conn.execute(statement, params)
    return store


@pytest.mark.parametrize("document", MALFORMED_WORKSPACES)
async def test_a_malformed_workspace_row_is_refused_classified(
    tmp_path: Path, document: str
) -> None:
    store = await _store_with(
        tmp_path / "state.db",
        "INSERT INTO config_workspaces (tenant_id, version, published_version, document,"
        " updated_at) VALUES (?, 1, NULL, ?, ?)",
        (TENANT, document, AT),
    )
    try:
        with pytest.raises(ConfigurationError):
            await store.load(TENANT)
    finally:
        await store.close()


@pytest.mark.parametrize("document", MALFORMED_WORKSPACES)
async def test_a_malformed_change_row_is_refused_classified(tmp_path: Path, document: str) -> None:
    store = await _store_with(
        tmp_path / "state.db",
        "INSERT INTO config_changes (tenant_id, version, subject, at, action, target, reason,"
        " document) VALUES (?, 1, 's', ?, 'a', 't', NULL, ?)",
        (TENANT, AT, document),
    )
    try:
        with pytest.raises(ConfigurationError):
            await store.workspace_at(TENANT, 1)
    finally:
        await store.close()


@pytest.mark.parametrize("snapshot", MALFORMED_SNAPSHOTS)
async def test_a_malformed_publication_row_is_refused_classified(
    tmp_path: Path, snapshot: str
) -> None:
    store = await _store_with(
        tmp_path / "state.db",
        "INSERT INTO config_published (tenant_id, version, snapshot, published_at)"
        " VALUES (?, 1, ?, ?)",
        (TENANT, snapshot, AT),
    )
    try:
        with pytest.raises(ConfigurationError):
            await store.published_at(TENANT, 1)
        with pytest.raises(ConfigurationError):
            await store.published(TENANT)
    finally:
        await store.close()
