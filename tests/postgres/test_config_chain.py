"""The triple-control tests of ``tests/core/admin/test_chain.py``, on ``PostgresConfigStore``.

The same test bodies run here with every harness's workspaces, history and publications in
a fresh configuration schema on the test server (one pool per test, one schema per harness).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import psycopg_pool
import pytest
from psycopg import sql

from esra.postgres._config_schema import apply_config_schema
from esra.postgres._config_store import PostgresConfigStore
from tests.core.admin import test_chain
from tests.core.admin.test_chain import Admin, AdminFactory

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

globals().update(
    {name: value for name, value in vars(test_chain).items() if name.startswith("test_")}
)


@pytest.fixture
async def make_admin(pg_dsn: str) -> AsyncIterator[AdminFactory]:
    """Harnesses over fresh configuration schemas; every schema is dropped afterwards."""
    pool: psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]]
    pool = psycopg_pool.AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    )
    await pool.open(wait=True)
    schemas: list[str] = []

    async def make() -> Admin:
        schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
        schemas.append(schema)
        async with pool.connection() as conn:
            await apply_config_schema(conn, schema)
        return Admin(store=PostgresConfigStore(pool, schema=schema))

    yield make
    async with pool.connection() as conn:
        for schema in schemas:
            await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    await pool.close()
