"""Hosts sharing one PostgreSQL state database forward the audit outbox without duplicates.

Every host forwards the held audit records of administrative changes — after each change, at
start and on its timer — so two hosts often forward at once. Each used to read every held
record and hand it to its sink: a record held while both forwarded reached the audit log
twice (the same ``admin:<uuid>`` correlation id, told apart only by a reader). A host now
forwards a record only while it holds the outbox's claim (a transaction-scoped advisory lock,
held across the sink's call), which the server releases with the session of a host that
died, so a dead host never keeps the others from forwarding.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql

from esra.core.admin import AuditOutboxForwarder, forward_audit_outbox
from esra.core.audit import AuditRecord
from esra.core.testing import InMemoryAuditSink
from esra.core.testing.config_contract import hold_audit_records
from esra.postgres._config_schema import apply_config_schema
from esra.postgres._config_store import PostgresConfigStore
from tests._outbox_drainer import forward_within, stuck_drainer

pytestmark = [pytest.mark.postgres, pytest.mark.integration]


@pytest.fixture
async def config_schema(pg_dsn: str) -> AsyncIterator[str]:
    """A freshly applied configuration schema, dropped afterwards."""
    schema = f"esra_test_outbox_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        assert await apply_config_schema(conn, schema)
    yield schema
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


class _Stuck:
    """Is handed a record, then waits until it is cancelled."""

    def __init__(self) -> None:
        self.handed = asyncio.Event()

    async def record(self, record: AuditRecord) -> None:
        del record
        self.handed.set()
        await asyncio.Event().wait()


async def _host(pg_dsn: str, schema: str, name: str) -> PostgresConfigStore:
    """One host's configuration store: its own pool, named, so the test can find its
    sessions on the server."""
    return await PostgresConfigStore.open(
        pg_dsn,
        kwargs={"application_name": name},
        schema=schema,
        apply_schema=False,
        max_size=2,
    )


async def test_a_host_whose_session_dies_mid_forward_leaves_the_outbox_to_the_others(
    pg_dsn: str, config_schema: str
) -> None:
    name = f"esra-test-drainer-{uuid.uuid4().hex[:8]}"
    dying = await _host(pg_dsn, config_schema, name)
    other = await _host(pg_dsn, config_schema, "esra-test-other")
    try:
        held = await hold_audit_records(dying, 2)
        stuck = _Stuck()
        forwarding = asyncio.create_task(forward_audit_outbox(dying, stuck))
        async with asyncio.timeout(30):
            await stuck.handed.wait()

        # The first host's sink has the oldest record: the other host leaves the outbox to it.
        sink = InMemoryAuditSink()
        assert await forward_audit_outbox(other, sink) == 0
        assert sink.records == []

        # Its session ends (a network cut, the server restarting it): its claim goes too.
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            ended = await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid IN"
                " (SELECT pid FROM pg_locks WHERE locktype = 'advisory')",
                (name,),
            )
            assert await ended.fetchall() == [(True,)]
        await forward_within(other, sink, expected=2)
        assert sink.records == held
        assert await other.pending_audit() == []

        forwarding.cancel()
        with pytest.raises((asyncio.CancelledError, psycopg.OperationalError)):
            await forwarding
    finally:
        await dying.close()
        await other.close()


async def test_a_host_killed_mid_forward_leaves_the_outbox_to_the_others(
    pg_dsn: str, config_schema: str
) -> None:
    store = await _host(pg_dsn, config_schema, "esra-test-survivor")
    try:
        held = await hold_audit_records(store, 3)
        sink = InMemoryAuditSink()
        with stuck_drainer("postgres", pg_dsn, config_schema) as drainer:
            assert drainer.correlation_id == held[0].correlation_id
            assert await forward_audit_outbox(store, sink) == 0  # the drainer holds it
            drainer.kill()
            # The killed host's record goes to this one's sink (its own never took it).
            await forward_within(store, sink, expected=3)
        assert sink.records == held
    finally:
        await store.close()


async def test_a_forwarder_stopped_mid_forward_leaves_its_record_to_the_next_forward(
    pg_dsn: str, config_schema: str
) -> None:
    stopping = await _host(pg_dsn, config_schema, "esra-test-stopping")
    other = await _host(pg_dsn, config_schema, "esra-test-other")
    try:
        held = await hold_audit_records(stopping, 2)
        stuck = _Stuck()
        forwarding = asyncio.create_task(
            AuditOutboxForwarder(stopping, stuck, interval_s=0.1).run()
        )
        async with asyncio.timeout(30):
            await stuck.handed.wait()
        forwarding.cancel()  # the host stops while its sink holds the oldest record
        with pytest.raises(asyncio.CancelledError):
            await forwarding

        # Its claim was rolled back with the transaction: the record is held, and free.
        sink = InMemoryAuditSink()
        assert await forward_audit_outbox(other, sink) == 2
        assert sink.records == held
    finally:
        await stopping.close()
        await other.close()
