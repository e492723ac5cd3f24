"""Configuration rows edited by hand on PostgreSQL: refused, classified, never served.

``jsonb`` guarantees JSON, not a workspace: an array, a missing key or a value of the wrong
type must fail closed with ``ConfigurationError`` (``ESRA_CONFIGURATION_INVALID``) rather than
an unclassified ``KeyError``/``ValueError`` (``ESRA_INTERNAL`` for every request of the tenant).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core.exceptions import ConfigurationError
from esra.postgres._config_store import PostgresConfigStore

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

TENANT = "tenant-a"

MALFORMED_WORKSPACES = [
    pytest.param("[]", id="not-an-object"),
    pytest.param('{"format": 1, "secret_rotations": {}}', id="no-tenant"),
    pytest.param(
        '{"format": 1, "secret_rotations": {}, "tenant_id": "tenant-a", "version": "x",'
        ' "snapshot": {}}',
        id="version-not-a-number",
    ),
]


@pytest.fixture
async def store(pg_dsn: str, pg_schema: str) -> AsyncIterator[PostgresConfigStore]:
    opened = await PostgresConfigStore.open(pg_dsn, schema=pg_schema)
    yield opened
    await opened.close()


def _insert(dsn: str, statement: str, schema: str, document: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(statement).format(s=sql.Identifier(schema)), {"t": TENANT, "d": document}
        )


@pytest.mark.parametrize("document", MALFORMED_WORKSPACES)
async def test_a_malformed_workspace_row_is_refused_classified(
    store: PostgresConfigStore, pg_dsn: str, pg_schema: str, document: str
) -> None:
    _insert(
        pg_dsn,
        "INSERT INTO {s}.workspaces (tenant_id, version, published_version, document,"
        " updated_at) VALUES (%(t)s, 1, NULL, %(d)s::jsonb, now())",
        pg_schema,
        document,
    )
    with pytest.raises(ConfigurationError):
        await store.load(TENANT)


@pytest.mark.parametrize("document", MALFORMED_WORKSPACES)
async def test_a_malformed_change_row_is_refused_classified(
    store: PostgresConfigStore, pg_dsn: str, pg_schema: str, document: str
) -> None:
    _insert(
        pg_dsn,
        "INSERT INTO {s}.changes (tenant_id, version, subject, at, action, target, reason,"
        " document) VALUES (%(t)s, 1, 's', now(), 'a', 't', NULL, %(d)s::jsonb)",
        pg_schema,
        document,
    )
    with pytest.raises(ConfigurationError):
        await store.workspace_at(TENANT, 1)


@pytest.mark.parametrize("snapshot", ["[]", "{}", '"text"', "null"])
async def test_a_malformed_publication_row_is_refused_classified(
    store: PostgresConfigStore, pg_dsn: str, pg_schema: str, snapshot: str
) -> None:
    _insert(
        pg_dsn,
        "INSERT INTO {s}.published (tenant_id, version, snapshot, published_at)"
        " VALUES (%(t)s, 1, %(d)s::jsonb, now())",
        pg_schema,
        snapshot,
    )
    with pytest.raises(ConfigurationError):
        await store.published_at(TENANT, 1)
