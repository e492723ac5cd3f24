"""``esra config import --config`` on a PostgreSQL ``[state]``: audited where the host audits.

A settings file whose state database is PostgreSQL (its password a ``${secret:env:...}``
reference, as a host's is): the import's denial and each of its changes are in the audit
schema ``esra audit --config`` reads — the one ``GET /admin/v1/audit`` reads — with the tenant
on every record.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from psycopg import sql

from esra.core._admin.roles import Role
from esra.core.admin import Administrator, ConnectionSecretService, Grant, InMemorySecretVault
from esra.core.codes import AuditEvent
from esra.core.config import dump_snapshot
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing.config_contract import SECRET_REF, contract_snapshot
from esra.postgres._config_store import PostgresConfigStore
from esra.starlette._cli import main
from tests.postgres.conftest import admin
from tests.starlette._settings_files import write_host_settings
from tests.starlette._tokens import idp

pytestmark = pytest.mark.integration

TENANT = "acme-import-pg"
PASSWORD_VARIABLE = "ESRA_TEST_IMPORT_STATE_PASSWORD"


@pytest.fixture
def schemas(pg_dsn: str) -> Iterator[dict[str, str]]:
    """Fresh state schemas (configuration, secrets, audit), dropped afterwards."""
    suffix = uuid.uuid4().hex[:10]
    names = {
        "config": f"esra_t_icfg_{suffix}",
        "secrets": f"esra_t_isec_{suffix}",
        "audit": f"esra_t_iaud_{suffix}",
    }
    yield names
    with admin(pg_dsn) as conn:
        for name in names.values():
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _settings(tmp_path: Path, dsn: str, schemas: dict[str, str]) -> Path:
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    user, database = parts.username or "postgres", parts.path.lstrip("/")
    state = f"postgresql://{user}:${{secret:env:{PASSWORD_VARIABLE}}}@{host}:{port}/{database}"
    durable = f"""[state]
database = "{state}"
config_schema = "{schemas["config"]}"
secrets_schema = "{schemas["secrets"]}"
audit_schema = "{schemas["audit"]}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"
"""
    return write_host_settings(tmp_path, tenant=TENANT, durable=durable)


def _seed_secret(dsn: str, schema: str) -> None:
    """What SECURITY_MANAGE does through the API before anything can be modelled."""

    async def seed() -> None:
        store = await PostgresConfigStore.open(dsn, schema=schema)
        try:
            security = Administrator.of("sec", Grant(Role.SECURITY_MANAGE, TENANT))
            service = ConnectionSecretService(
                store, InMemorySecretVault(), audit=InMemoryAuditSink(), clock=FakeClock()
            )
            await service.put_secret(security, TENANT, SECRET_REF, "never-exported")
        finally:
            await store.close()

    asyncio.run(seed())


def _token(role: Role, *, subject: str) -> str:
    now = int(time.time())
    return idp().token(
        sub=subject, esra_tenant=TENANT, esra_roles=[role.value], iat=now, nbf=now, exp=now + 900
    )


def test_import_with_a_postgres_state_writes_its_audit_where_the_host_reads_it(
    tmp_path: Path,
    pg_dsn: str,
    schemas: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(PASSWORD_VARIABLE, urlsplit(pg_dsn).password or "unused-by-trust-auth")
    config = _settings(tmp_path, pg_dsn, schemas)
    _seed_secret(pg_dsn, schemas["config"])
    document = tmp_path / "import.json"
    document.write_text(json.dumps(dump_snapshot(contract_snapshot(TENANT))))
    base = ["config", "import", str(document), "--config", str(config), "--publish"]
    modeller = _token(Role.ESRA_DATA_MANAGE, subject="modeller")
    assert main([*base, "--token", modeller]) == 1
    assert "it is audited" in capsys.readouterr().err
    args = list(base)
    for token in (
        modeller,
        _token(Role.GOVERNANCE_MANAGE, subject="governor"),
        _token(Role.ESRA_EXPOSURE_MANAGE, subject="publisher"),
    ):
        args += ["--token", token]
    assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()

    assert main(["audit", "--config", str(config), "--tenant", TENANT, "--all"]) == 0
    records: list[dict[str, Any]] = [
        json.loads(line) for line in capsys.readouterr().out.splitlines()
    ]
    steps = {(r["event"], r["outcome"], r["dimensions"]["subject"]) for r in records}
    assert (AuditEvent.ADMIN_POLICY_AUTHOR.value, "denied", "modeller") in steps, steps
    for event, subject in (
        (AuditEvent.ADMIN_SOURCE_MODEL, "modeller"),
        (AuditEvent.ADMIN_CAPABILITY_DEFINE, "modeller"),
        (AuditEvent.ADMIN_POLICY_AUTHOR, "governor"),
        (AuditEvent.ADMIN_EXPOSURE_BIND, "publisher"),
        (AuditEvent.ADMIN_EXPOSURE_PUBLISH, "publisher"),
    ):
        assert (event.value, "ok", subject) in steps, (event, steps)
    assert {r["tenant_id"] for r in records} == {TENANT}
