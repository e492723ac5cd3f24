"""The store principal's role attributes: BYPASSRLS and CREATEROLE are refused like SUPERUSER.

The store principal is the one ESRA principal with DDL, so it is scoped tightly (spec 004).
``BYPASSRLS`` reads every table it may select past every row-level security policy — the
isolation a deployment sharing the database may rely on; ``CREATEROLE`` makes roles and, up to
PostgreSQL 15, grants itself any non-superuser role (``pg_execute_server_program``, a shell as
the server's account; ``pg_read_server_files``). The store needs neither.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from psycopg import sql

from esra.core.testing import FakeClock, InMemoryAuditSink, InMemorySecretStore, StaticHostAllowlist
from esra.postgres import StoreFailure, StoreState, initialise_store
from tests.postgres.conftest import admin, host_port

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

TENANT = "acme"


@pytest.fixture(params=["BYPASSRLS", "CREATEROLE", "NOBYPASSRLS NOCREATEROLE"])
def principal(pg_dsn: str, request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A login role with CREATE on the database and the attribute under test; its DSN."""
    name = f"esra_store_role_{uuid.uuid4().hex[:10]}"
    role = sql.Identifier(name)
    with admin(pg_dsn) as conn:
        database = conn.execute("SELECT current_database()").fetchone()
        assert database is not None
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN " + request.param).format(role))
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(str(database[0])), role
            )
        )
    host, port = host_port(pg_dsn)
    yield request.param, f"postgresql://{name}@{host}:{port}/{pg_dsn.rsplit('/', 1)[-1]}"
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(role))
        conn.execute(sql.SQL("DROP ROLE {}").format(role))


async def test_a_privileged_principal_is_refused_before_any_ddl(
    pg_dsn: str, store_schema: str, principal: tuple[str, str]
) -> None:
    """BYPASSRLS or CREATEROLE: Failed, classified PRIVILEGED_PRINCIPAL with a remedy naming
    the attribute, audited, and no schema created; a role with neither initialises."""
    attributes, connection = principal
    audit = InMemoryAuditSink()
    host, port = host_port(pg_dsn)
    outcome = await initialise_store(
        tenant_id=TENANT,
        connection=connection,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(TENANT, host, port)]),
        audit=audit,
        clock=FakeClock(),
        schema=store_schema,
    )
    with admin(pg_dsn) as conn:
        row = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (store_schema,)).fetchone()
    created = bool(row and row[0])
    if attributes.startswith("NO"):
        assert outcome.state is StoreState.READY, outcome
        assert created
        return
    assert outcome.state is StoreState.FAILED
    assert outcome.reason == StoreFailure.PRIVILEGED_PRINCIPAL
    assert outcome.remedy is not None
    assert attributes in outcome.remedy
    assert [r.reason for r in audit.records if r.outcome == "failed"] == ["PRIVILEGED_PRINCIPAL"]
    assert not created
