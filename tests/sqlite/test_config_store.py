"""The ``WorkspaceStore`` contract suite against ``SqliteConfigStore``, and its schema's guards.

A twin is a second ``SqliteConfigStore`` on the same file: its own connection and thread, so
the concurrency tests race two real SQLite connections.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from esra.core._admin.store import ConfigChange, WorkspaceStore
from esra.core._admin.workspace import AdminWorkspace
from esra.core.docstore import StoreState, StoreStateTable, StoreStatus
from esra.core.testing.config_contract import T0, WorkspaceStoreContract, contract_snapshot
from esra.core.testing.store_state_contract import StoreStateTableContract
from esra.sqlite._config_schema import _MIGRATIONS, CONFIG_SCHEMA_VERSION, apply_config_schema
from esra.sqlite._config_store import SqliteConfigStore
from esra.sqlite._schema_migrations import apply_migrations

TENANT = "tenant-a"


class TestSqliteConfigStoreContract(WorkspaceStoreContract):
    """Every rule of the port, on SQLite."""

    def make_store(self, tmp_path: Path) -> WorkspaceStore:
        return SqliteConfigStore(tmp_path / "config.db")

    def open_twin(self, store: WorkspaceStore) -> WorkspaceStore:
        assert isinstance(store, SqliteConfigStore)
        return SqliteConfigStore(store.path)


async def _published_store(path: Path) -> None:
    store = SqliteConfigStore(path)
    try:
        first = AdminWorkspace(tenant_id=TENANT).next(
            snapshot=contract_snapshot(), secret_rotations={"secret://hr-db": 1}, published=True
        )
        change = ConfigChange(TENANT, 1, "alice", T0, "esra.admin.exposure.publish", "hr_search")
        await store.save(first, expected_version=0, change=change)
    finally:
        await store.close()


async def test_published_snapshots_and_history_refuse_update_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "config.db"
    await _published_store(path)
    with sqlite3.connect(path) as connection:
        for statement in (
            "UPDATE config_published SET snapshot = '{}'",
            "DELETE FROM config_published",
            "UPDATE config_changes SET subject = 'mallory'",
            "DELETE FROM config_changes",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="immutable"):
                connection.execute(statement)
    store = SqliteConfigStore(path)
    try:
        assert await store.published_at(TENANT, 1) == contract_snapshot()
        assert [c.subject for c in await store.history(TENANT)] == ["alice"]
    finally:
        await store.close()


async def test_the_schema_applies_once_and_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "config.db"
    await _published_store(path)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        assert apply_config_schema(connection) == CONFIG_SCHEMA_VERSION
        assert apply_config_schema(connection) == CONFIG_SCHEMA_VERSION
        (count,) = connection.execute("SELECT count(*) FROM config_schema").fetchone()
        assert count == CONFIG_SCHEMA_VERSION  # one row per migration, each applied once
    finally:
        connection.close()
    store = SqliteConfigStore(path)
    try:
        assert await store.published_versions() == {TENANT: 1}
    finally:
        await store.close()


async def test_no_secret_value_is_stored(tmp_path: Path) -> None:
    """The workspace records the reference and its rotations only; scan the file's bytes."""
    path = tmp_path / "config.db"
    await _published_store(path)
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("config.db"))
    assert b"secret://hr-db" in data
    assert b"password" not in data.lower()


class TestSqliteStoreStateTable(StoreStateTableContract):
    """The document stores' shared lifecycle state, two handles on one file."""

    @contextlib.asynccontextmanager
    async def open_tables(
        self, tmp_path: Path
    ) -> AsyncIterator[tuple[StoreStateTable, StoreStateTable]]:
        one = SqliteConfigStore(tmp_path / "state.db")
        other = SqliteConfigStore(tmp_path / "state.db")
        try:
            yield one, other
        finally:
            await other.close()
            await one.close()


async def test_a_version_1_database_gains_the_store_states_in_place(tmp_path: Path) -> None:
    """A data directory from before store states (and the audit outbox) is migrated when the
    store first runs."""
    path = tmp_path / "state.db"
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        assert (
            apply_migrations(
                connection,
                version_table="config_schema",
                migrations={1: _MIGRATIONS[1]},
                target=1,
                subject="configuration",
            )
            == 1
        )
    finally:
        connection.close()
    store = SqliteConfigStore(path)
    try:
        state = StoreState(StoreStatus.FAILED, T0, failure="disk_full", remedy="Free space.")
        await store.write_store_state("tenant-a", state)
        assert await store.read_store_state("tenant-a") == state
        assert await store.pending_audit() == []
        assert await store.initialize() == CONFIG_SCHEMA_VERSION == 3
    finally:
        await store.close()
