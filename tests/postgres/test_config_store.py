"""The ``WorkspaceStore`` contract suite against ``PostgresConfigStore``, and the server's guards.

Every store the suite opens lives in its own freshly applied configuration schema
(``esra_test_config_<random>``), dropped afterwards. A twin is a second store with its own
pool on the same schema, so the concurrency tests race two real server connections.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from esra.core._admin.store import ConfigChange, WorkspaceStore
from esra.core._admin.workspace import AdminWorkspace
from esra.core.docstore import StoreState, StoreStateTable, StoreStatus
from esra.core.testing.config_contract import T0, WorkspaceStoreContract, contract_snapshot
from esra.core.testing.store_state_contract import StoreStateTableContract
from esra.postgres._config_schema import (
    CONFIG_NOTIFY_CHANNEL,
    CONFIG_SCHEMA_VERSION,
    apply_config_schema,
    config_schema_version,
)
from esra.postgres._config_schema import _statements as config_statements
from esra.postgres._config_store import PostgresConfigStore
from esra.postgres._schema_migrations import apply_migrations

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

TENANT = "tenant-a"


class _SchemaStore(PostgresConfigStore):
    """Drops its private schema on close, if it is the schema's first handle."""

    dsn: str
    drop: str | None = None

    async def close(self) -> None:
        await super().close()
        if self.drop is not None:
            async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                await conn.execute(
                    sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.drop))
                )


class TestPostgresConfigStoreContract(WorkspaceStoreContract):
    """Every rule of the port, on PostgreSQL."""

    @pytest.fixture(autouse=True)
    def _dsn(self, pg_dsn: str) -> None:
        self.dsn = pg_dsn

    async def make_store(self, tmp_path: Path) -> WorkspaceStore:
        del tmp_path
        schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
        store = await _SchemaStore.open(self.dsn, schema=schema, max_size=2)
        store.dsn, store.drop = self.dsn, schema
        return store

    async def open_twin(self, store: WorkspaceStore) -> WorkspaceStore:
        assert isinstance(store, _SchemaStore)
        assert store.drop is not None
        twin = await _SchemaStore.open(self.dsn, schema=store.drop, max_size=2)
        twin.dsn = self.dsn
        return twin


@pytest.fixture
async def config_schema(pg_dsn: str) -> AsyncIterator[str]:
    """A freshly applied configuration schema, dropped afterwards."""
    schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        assert await apply_config_schema(conn, schema)
    yield schema
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


async def _publish_one(store: PostgresConfigStore) -> None:
    first = AdminWorkspace(tenant_id=TENANT).next(
        snapshot=contract_snapshot(), secret_rotations={"secret://hr-db": 1}, published=True
    )
    change = ConfigChange(TENANT, 1, "alice", T0, "esra.admin.exposure.publish", "hr_search")
    await store.save(first, expected_version=0, change=change)


async def test_the_schema_applies_once(pg_dsn: str, config_schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        assert not await apply_config_schema(conn, config_schema)
        assert await config_schema_version(conn, config_schema) == CONFIG_SCHEMA_VERSION


async def test_the_server_refuses_to_rewrite_publications_or_history(
    pg_dsn: str, config_schema: str
) -> None:
    store = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=1)
    try:
        await _publish_one(store)
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        for table, statement in (
            ("published", "UPDATE {} SET snapshot = '{{}}'::jsonb"),
            ("published", "DELETE FROM {}"),
            ("published", "TRUNCATE {}"),
            ("changes", "UPDATE {} SET subject = 'mallory'"),
            ("changes", "DELETE FROM {}"),
        ):
            with pytest.raises(psycopg.errors.RestrictViolation, match="immutable"):
                await conn.execute(sql.SQL(statement).format(sql.Identifier(config_schema, table)))
    store = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=1)
    try:
        assert await store.published_at(TENANT, 1) == contract_snapshot()
        assert [c.subject for c in await store.history(TENANT)] == ["alice"]
    finally:
        await store.close()


async def test_a_publication_is_announced_at_commit(pg_dsn: str, config_schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as listener:
        await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CONFIG_NOTIFY_CHANNEL)))
        store = await PostgresConfigStore.open(pg_dsn, schema=config_schema, max_size=1)
        try:
            await _publish_one(store)
        finally:
            await store.close()
        payloads = []
        async for notify in listener.notifies(timeout=10, stop_after=1):
            payloads.append(notify.payload)
        assert payloads == [f"{config_schema} {TENANT} 1"]


class TestPostgresStoreStateTable(StoreStateTableContract):
    """The document stores' shared lifecycle state, two pools on one configuration schema."""

    @pytest.fixture(autouse=True)
    def _dsn(self, pg_dsn: str) -> None:
        self.dsn = pg_dsn

    @contextlib.asynccontextmanager
    async def open_tables(
        self, tmp_path: Path
    ) -> AsyncIterator[tuple[StoreStateTable, StoreStateTable]]:
        del tmp_path
        schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
        one = await _SchemaStore.open(self.dsn, schema=schema, max_size=2)
        one.dsn, one.drop = self.dsn, schema
        other = await PostgresConfigStore.open(self.dsn, schema=schema, max_size=2)
        try:
            yield one, other
        finally:
            await other.close()
            await one.close()


async def test_a_version_1_schema_gains_the_store_states_in_place(pg_dsn: str) -> None:
    """A deployment's configuration schema from before store states is migrated, its
    workspaces kept, the next time a host applies the schema."""
    schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await apply_migrations(
                conn,
                schema=schema,
                table="schema_version",
                lock="esra.config",
                migrations={1: config_statements(schema)},
                target=1,
                subject="configuration",
            )
        store = await PostgresConfigStore.open(pg_dsn, schema=schema, max_size=1)
        try:
            await _publish_one(store)
            state = StoreState(StoreStatus.ENABLED, T0)
            await store.write_store_state(TENANT, state)
            assert await store.read_store_state(TENANT) == state
            assert (await store.load(TENANT)) is not None
            assert await store.pending_audit() == []
        finally:
            await store.close()
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            assert await config_schema_version(conn, schema) == CONFIG_SCHEMA_VERSION == 3
    finally:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
