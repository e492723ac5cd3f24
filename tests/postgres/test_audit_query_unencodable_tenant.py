"""PostgresAuditLog.query: a tenant filter is bound like the tenant written, NUL and all.

Records are written with NUL and lone surrogates replaced (PostgreSQL text cannot hold
them); the subject and correlation filters are replaced the same way, and so must the
tenant be, or reading the records of such a tenant fails in the driver instead of finding them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core._audit.query import AuditQuery
from esra.core.testing.audit_contract import contract_record
from esra.postgres._audit import PostgresAuditLog
from esra.postgres._audit_schema import apply_audit_schema

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def log(pg_dsn: str) -> AsyncIterator[PostgresAuditLog]:
    schema = f"esra_test_audit_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await apply_audit_schema(conn, schema)
    opened = await PostgresAuditLog.open(pg_dsn, schema=schema)
    try:
        yield opened
    finally:
        await opened.close()
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


@pytest.mark.parametrize("tenant", ["t\x00", "t\ud800"])
async def test_a_tenant_the_server_cannot_hold_reads_its_records(
    log: PostgresAuditLog, tenant: str
) -> None:
    """Written and read with the same replacement: found, and no other tenant's."""
    await log.write_batch([contract_record(1, tenant=tenant), contract_record(2)])
    page = await log.query(AuditQuery(tenant_id=tenant))
    assert [r.correlation_id for r in page.records] == ["corr-1"]
