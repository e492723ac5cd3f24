"""PostgresAuditLog on a real server: the contract, and the host role's append-only rights.

Each log lives in its own freshly applied schema (``esra_test_audit_<random>``), dropped on
close. The privilege tests create a dedicated login role ``esra_host_<random>`` holding only
what ``grant_audit_writer`` grants, connect as it through psycopg, and show the server
refuses it every change to written rows.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import attrs
import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from esra.core._audit.batching import BatchingAuditSink
from esra.core._audit.query import AuditQuery
from esra.core.codes import AuditEvent
from esra.core.testing.audit_contract import T0, TENANT, AuditLogContract, contract_record
from esra.postgres._audit import PostgresAuditLog, prune_audit_before
from esra.postgres._audit_schema import (
    AUDIT_SCHEMA_VERSION,
    apply_audit_schema,
    audit_schema_version,
    grant_audit_writer,
)
from tests._cutting_proxy import CuttingProxy

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


async def _drop(dsn: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


class _SchemaLog(PostgresAuditLog):
    """Drops its private schema on close."""

    dsn: str
    schema_name: str

    async def close(self) -> None:
        await super().close()
        await _drop(self.dsn, self.schema_name)


class TestPostgresAuditLog(AuditLogContract):
    """The PostgreSQL log honours the contract."""

    @pytest.fixture(autouse=True)
    def _dsn(self, pg_dsn: str) -> None:
        self.dsn = pg_dsn

    async def make_log(self, tmp_path: Path) -> PostgresAuditLog:
        """A log over a new, empty audit schema."""
        del tmp_path
        schema = f"esra_test_audit_{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            assert await apply_audit_schema(conn, schema)
        log = await _SchemaLog.open(self.dsn, schema=schema)
        log.dsn, log.schema_name = self.dsn, schema
        return log


@attrs.frozen
class _Deployment:
    owner_dsn: str
    host_dsn: str
    schema: str
    role: str


@pytest.fixture
async def deployment(pg_dsn: str) -> AsyncIterator[_Deployment]:
    """An audit schema applied by the owner, and a host login role granted only writing."""
    suffix = uuid.uuid4().hex[:12]
    schema, role = f"esra_test_audit_{suffix}", f"esra_host_{suffix}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        await apply_audit_schema(conn, schema)
        await grant_audit_writer(conn, role, schema)
    try:
        yield _Deployment(pg_dsn, make_conninfo(pg_dsn, user=role), schema, role)
    finally:
        await _drop(pg_dsn, schema)
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            await conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


async def test_the_host_role_cannot_update_delete_or_truncate(deployment: _Deployment) -> None:
    """Written as the host role, read back identical; its changes are refused by privilege."""
    log = await PostgresAuditLog.open(deployment.host_dsn, schema=deployment.schema)
    written = [
        contract_record(1, subject="alice", sources=("s-1", "s-2")),
        contract_record(2, event=AuditEvent.ADMIN_SECRET_WRITE, subject="sec", ratio=0.25),
    ]
    try:
        sink = BatchingAuditSink(log, flush_interval_s=0.01)
        for record in written:
            await sink.record(record)
        await sink.aclose()
        page = await log.query(AuditQuery(tenant_id=TENANT))
        assert list(page.records) == written[::-1]
    finally:
        await log.close()
    records = sql.Identifier(deployment.schema, "records")
    attacks = (
        sql.SQL("UPDATE {} SET outcome = 'ok', reason = NULL").format(records),
        sql.SQL("DELETE FROM {} WHERE correlation_id = 'corr-1'").format(records),
        sql.SQL("TRUNCATE {}").format(records),
        sql.SQL("SELECT {}(now())").format(sql.Identifier(deployment.schema, "prune_before")),
        sql.SQL("ALTER TABLE {} DISABLE TRIGGER ALL").format(records),
        sql.SQL("DROP TABLE {}").format(records),
    )
    async with await psycopg.AsyncConnection.connect(deployment.host_dsn, autocommit=True) as conn:
        who = await (await conn.execute("SELECT current_user")).fetchone()
        assert who == (deployment.role,)
        for attack in attacks:
            with pytest.raises(errors.InsufficientPrivilege) as refused:
                await conn.execute(attack)
            # The privilege system refuses, before any trigger could run.
            assert "append-only" not in str(refused.value)
    async with await psycopg.AsyncConnection.connect(deployment.owner_dsn) as owner:
        count = await (
            await owner.execute(sql.SQL("SELECT count(*) FROM {}").format(records))
        ).fetchone()
        assert count == (2,)


async def test_the_owner_is_held_to_append_only_except_by_retention(
    deployment: _Deployment,
) -> None:
    """The owner's ad-hoc UPDATE, DELETE and TRUNCATE fail; prune_before removes old rows."""
    owner_log = await PostgresAuditLog.open(deployment.owner_dsn, schema=deployment.schema)
    try:
        await owner_log.write_batch([contract_record(n) for n in range(5)])
    finally:
        await owner_log.close()
    records = sql.Identifier(deployment.schema, "records")
    async with await psycopg.AsyncConnection.connect(deployment.owner_dsn, autocommit=True) as conn:
        for statement in (
            sql.SQL("UPDATE {} SET outcome = 'x'").format(records),
            sql.SQL("DELETE FROM {}").format(records),
            sql.SQL("TRUNCATE {}").format(records),
        ):
            with pytest.raises(errors.InsufficientPrivilege, match="append-only"):
                await conn.execute(statement)
        assert await prune_audit_before(conn, T0 + timedelta(seconds=2), deployment.schema) == 2
        # The cutoff held for retention's own transaction only.
        with pytest.raises(errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(sql.SQL("DELETE FROM {}").format(records))
        left = await (
            await conn.execute(
                sql.SQL("SELECT correlation_id FROM {} ORDER BY seq").format(records)
            )
        ).fetchall()
        assert left == [("corr-2",), ("corr-3",), ("corr-4",)]


async def test_the_host_role_cannot_prune_through_the_helper(deployment: _Deployment) -> None:
    """Retention run on the host's connection is refused by the server."""
    async with await psycopg.AsyncConnection.connect(deployment.host_dsn, autocommit=True) as conn:
        with pytest.raises(errors.InsufficientPrivilege):
            await prune_audit_before(conn, T0, deployment.schema)


async def test_nul_in_a_dimension_cannot_poison_a_batch(deployment: _Deployment) -> None:
    """A value PostgreSQL cannot store is replaced, so the batch still commits."""
    log = await PostgresAuditLog.open(deployment.host_dsn, schema=deployment.schema)
    try:
        await log.write_batch([contract_record(1, subject="a\x00b", tags=("x\x00",))])
        (record,) = (await log.query(AuditQuery(tenant_id=TENANT))).records
        assert record.dimensions == {"subject": "a\ufffdb", "tags": ("x\ufffd",)}
        assert (await log.query(AuditQuery(tenant_id=TENANT, subject="a\x00b"))).records
    finally:
        await log.close()


async def test_schema_applies_once(pg_dsn: str) -> None:
    """A second apply changes nothing and reports so."""
    schema = f"esra_test_audit_{uuid.uuid4().hex[:12]}"
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            assert await apply_audit_schema(conn, schema)
            assert not await apply_audit_schema(conn, schema)
            assert await audit_schema_version(conn, schema) == AUDIT_SCHEMA_VERSION
    finally:
        await _drop(pg_dsn, schema)


async def test_a_batch_bound_as_binary_arrays_reads_back_exactly(
    deployment: _Deployment,
) -> None:
    """Array syntax in values (quotes, braces, commas, backslashes), NULL beside text, and
    a full batch: what the text format would have had to escape is stored as given."""
    log = await PostgresAuditLog.open(deployment.host_dsn, schema=deployment.schema)
    hostile = 'a "quoted", {braced} \\ back\\slash NULL ümlaut'
    written = [
        contract_record(0, subject=hostile, tags=('{"x"}', "y,z", "NULL")),
        contract_record(1),  # no subject: NULL in the middle of the subject array
        *(contract_record(n, subject=f"s-{n}") for n in range(2, 500)),
    ]
    try:
        await log.write_batch(written)
        page = await log.query(AuditQuery(tenant_id=TENANT, limit=1000))
        assert sorted(page.records, key=lambda r: r.correlation_id) == sorted(
            written, key=lambda r: r.correlation_id
        )
        assert (await log.query(AuditQuery(tenant_id=TENANT, subject=hostile))).records
    finally:
        await log.close()


@pytest.mark.parametrize(
    ("cut_at", "in_requests"),
    [
        pytest.param((b"INSERT 0 ",), False, id="the answer lost: the batch was committed"),
        pytest.param((b"INSERT INTO",), True, id="the statement lost: it never ran"),
        pytest.param(
            (b"INSERT 0 ", b"SELECT 1"), False, id="the answer lost, then the look for it"
        ),
    ],
)
async def test_a_batch_whose_connection_was_cut_is_written_once(
    deployment: _Deployment, cut_at: tuple[bytes, ...], *, in_requests: bool
) -> None:
    """The connection is cut as a batch's statement goes to the server, or as its answer
    comes back after the commit (and again as the log looks for the batch): the log cannot
    tell which, the sink writes the batch again, and each record is stored exactly once
    (lost answer: it was stored twice)."""
    upstream = conninfo_to_dict(deployment.host_dsn)
    address = (str(upstream.get("host") or "127.0.0.1"), int(str(upstream.get("port") or 5432)))
    with CuttingProxy(address, cut_at=cut_at, in_requests=in_requests) as proxy:
        through = make_conninfo(deployment.host_dsn, host="127.0.0.1", port=proxy.port)
        log = await PostgresAuditLog.open(through, schema=deployment.schema)
        try:
            sink = BatchingAuditSink(log, retry_initial_s=0.01)
            try:
                await sink.record(contract_record(1))
                await sink.record(contract_record(2))
                await sink.flush()
            finally:
                await sink.aclose()
            assert proxy.cut.is_set()
            page = await log.query(AuditQuery(tenant_id=TENANT))
        finally:
            await log.close()
    assert sorted(r.correlation_id for r in page.records) == sorted(
        contract_record(n).correlation_id for n in (1, 2)
    )
