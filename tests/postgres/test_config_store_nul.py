"""NUL never reaches the PostgreSQL configuration store, and never loses a held record.

PostgreSQL text and ``jsonb`` cannot hold U+0000. A NUL that reached a save — in a secret
reference (the URL path ``/secrets/a%00b``), a source's description, a change reason —
failed it with a driver's error: the admin API answered ``ESRA_INTERNAL`` and the attempt
went unaudited. Configuration text with a NUL is refused where it enters, as invalid
configuration (``ESRA_CONFIGURATION_INVALID``), and audited ``rejected``; an audit record
held in the outbox has its NUL replaced by U+FFFD, as the PostgreSQL audit log does.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg_pool
import pytest
from psycopg import sql

from esra.core._admin.workspace import AdminWorkspace
from esra.core.admin import ConfigChange, Role
from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent
from esra.core.config import CONVERTER, Source, dump_snapshot, load_part
from esra.core.docstore import StoreState, StoreStatus
from esra.core.exceptions import ConfigurationError
from esra.postgres._config_schema import apply_config_schema
from esra.postgres._config_store import PostgresConfigStore
from tests.core.admin.test_chain import SECRET_VALUE, Admin, holder, policy, run_until
from tests.core.factories import TENANT, make_source

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.asyncio]


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PostgresConfigStore]:
    pool: psycopg_pool.AsyncConnectionPool[psycopg.AsyncConnection[Any]]
    pool = psycopg_pool.AsyncConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    )
    await pool.open(wait=True)
    schema = f"esra_test_config_{uuid.uuid4().hex[:12]}"
    async with pool.connection() as conn:
        await apply_config_schema(conn, schema)
    yield PostgresConfigStore(pool, schema=schema)
    async with pool.connection() as conn:
        await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    await pool.close()


def _rejected(h: Admin, event: AuditEvent) -> list[AuditRecord]:
    return [r for r in h.audit.records if r.event is event and r.outcome == "rejected"]


async def test_a_secret_reference_with_a_nul_is_refused_and_audited(
    store: PostgresConfigStore,
) -> None:
    h = Admin(store=store)
    security = holder(Role.SECURITY_MANAGE)

    with pytest.raises(ConfigurationError):
        await h.secrets.put_secret(security, TENANT, "secret://s\x00-1", SECRET_VALUE)

    assert len(_rejected(h, AuditEvent.ADMIN_SECRET_WRITE)) == 1
    assert await store.load(TENANT) is None
    assert await store.pending_audit() == []


async def test_a_change_reason_with_a_nul_is_refused_and_audited(
    store: PostgresConfigStore,
) -> None:
    h = Admin(store=store)
    await run_until(h, 2)
    version = (await h.current(TENANT)).version

    with pytest.raises(ConfigurationError):
        await h.governance.author_policy(
            holder(Role.GOVERNANCE_MANAGE), TENANT, policy(), reason="approved\x00by ops"
        )

    assert len(_rejected(h, AuditEvent.ADMIN_POLICY_AUTHOR)) == 1
    assert (await h.current(TENANT)).version == version


async def test_configuration_text_with_a_nul_is_refused_where_it_is_read() -> None:
    document: dict[str, Any] = CONVERTER.unstructure(make_source("s-1", tenant_id=TENANT))
    document["description"] = "orders\x00 (hidden)"

    with pytest.raises(ConfigurationError, match=r"\$\.description"):
        load_part(document, Source, what="source")


async def test_a_held_record_with_a_nul_is_stored_with_u_fffd(
    store: PostgresConfigStore,
) -> None:
    # A record's dimensions are not all configuration (a token's subject, a store's
    # lifecycle detail): the outbox keeps what PostgreSQL cannot hold as U+FFFD.
    record = AuditRecord(
        event=AuditEvent.STORE_ENABLE,
        tenant_id=TENANT,
        correlation_id=f"admin:{uuid.uuid4().hex}",
        at=datetime(2024, 1, 1, tzinfo=UTC),
        outcome="ok",
        reason="ok\x00?",
        dimensions={"subject": "ops\x00@x", "ids": ("a\x00",)},
    )
    state = StoreState(status=StoreStatus.ENABLED, changed_at=datetime(2024, 1, 1, tzinfo=UTC))

    await store.write_store_state(TENANT, state, audit=record)

    (held,) = await store.pending_audit()
    assert held.correlation_id == record.correlation_id
    assert held.reason == "ok\ufffd?"
    assert held.dimensions["subject"] == "ops\ufffd@x"
    assert held.dimensions["ids"] == ("a\ufffd",)


async def test_a_workspace_save_holds_a_record_with_a_nul(store: PostgresConfigStore) -> None:
    workspace = AdminWorkspace(tenant_id=TENANT).next()
    change = ConfigChange(
        tenant_id=TENANT,
        version=workspace.version,
        subject="ops",
        at=datetime(2024, 1, 1, tzinfo=UTC),
        action=AuditEvent.ADMIN_CAPABILITY_DEFINE.value,
        target="c-1",
    )
    record = AuditRecord(
        event=AuditEvent.ADMIN_CAPABILITY_DEFINE,
        tenant_id=TENANT,
        correlation_id=f"admin:{uuid.uuid4().hex}",
        at=datetime(2024, 1, 1, tzinfo=UTC),
        outcome="ok",
        reason=None,
        dimensions={"capability_id": "c\x00-1"},
    )

    await store.save(workspace, expected_version=0, change=change, audit=record)

    (held,) = await store.pending_audit()
    assert held.dimensions["capability_id"] == "c\ufffd-1"
    assert dump_snapshot((await store.load(TENANT) or workspace).snapshot) is not None
