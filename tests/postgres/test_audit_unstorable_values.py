"""PostgresAuditLog holds what PostgreSQL cannot: it never makes a batch unwritable or a
tenant's records unreadable.

Python's ``json`` writes NaN and infinities as the bare tokens ``NaN``/``Infinity``, which
``jsonb`` refuses; the whole batch fails, the sink retries it for ever, and every record
queued behind it — every tenant's — is held until the sink refuses all of them.

Records are written with NUL and lone surrogates replaced (PostgreSQL text cannot hold
them); the subject and correlation filters are replaced the same way, and so must the
tenant be, or reading the records of such a tenant fails in the driver instead of finding
them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core._audit.query import AuditQuery
from esra.core.testing.audit_contract import TENANT, contract_record
from esra.postgres._audit import PostgresAuditLog, _columns
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


async def test_non_finite_floats_do_not_poison_the_batch(log: PostgresAuditLog) -> None:
    """NaN and both infinities: the batch commits, the good record beside them included."""
    await log.write_batch(
        [
            contract_record(0, ratio=0.5),
            contract_record(1, ratio=math.nan),
            contract_record(2, ratio=math.inf, other=-math.inf),
        ]
    )
    page = await log.query(AuditQuery(tenant_id=TENANT))
    assert [r.correlation_id for r in page.records] == ["corr-2", "corr-1", "corr-0"]
    assert page.records[2].dimensions == {"ratio": 0.5}
    # Kept as the token Python's json (the other sinks) writes, so the fact is not lost.
    assert page.records[1].dimensions == {"ratio": "NaN"}
    assert page.records[0].dimensions == {"ratio": "Infinity", "other": "-Infinity"}


async def test_a_retried_batch_with_non_finite_floats_is_found_stored(
    log: PostgresAuditLog,
) -> None:
    """The lost-answer check compares the stored dimensions with the ones bound."""
    records = [contract_record(1, ratio=math.nan)]
    await log.write_batch(records)
    assert await log._stored(_columns(records))


@pytest.mark.parametrize("tenant", ["t\x00", "t\ud800"])
async def test_a_tenant_the_server_cannot_hold_reads_its_records(
    log: PostgresAuditLog, tenant: str
) -> None:
    """Written and read with the same replacement: found, and no other tenant's."""
    await log.write_batch([contract_record(1, tenant=tenant), contract_record(2)])
    page = await log.query(AuditQuery(tenant_id=tenant))
    assert [r.correlation_id for r in page.records] == ["corr-1"]
