"""``esra migrate``: an owner applies the state schemas, the host's role owns nothing.

A login role with no privilege of its own is the host's. Before the migration a host with
``apply_schemas = false`` refuses to start, naming ``esra migrate``; the command (a real
process, run as the owner) applies the schemas twice — the second run changes nothing — and
grants that role what the host uses. The host then runs the whole triple-control chain
(secret, model, policy, publish) and writes and reads audit as that role, while the server
refuses it every change to what it wrote and every DDL on the state schemas.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from esra.core._admin.store import WorkspaceStore
from esra.core._audit.query import AuditQuery
from esra.core.codes import AuditEvent
from esra.core.docstore import StoreState, StoreStatus
from esra.core.testing import FakeClock
from esra.core.testing.config_contract import T0
from esra.postgres._config_schema import CONFIG_SCHEMA_VERSION
from esra.postgres._config_store import PostgresConfigStore
from esra.starlette._durable_state import StateDatabaseError, open_state
from esra.starlette._settings import StateSettings, load_settings
from tests.core.admin.test_chain import SECRET_REF, SECRET_VALUE, Admin, run_until
from tests.core.factories import TENANT
from tests.postgres.conftest import admin
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

pytestmark = pytest.mark.integration


@pytest.fixture
def host_role(pg_dsn: str) -> Iterator[str]:
    """A login role that owns nothing and may create nothing; dropped afterwards."""
    role = f"esra_t_host_{uuid.uuid4().hex[:10]}"
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    yield role
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def schemas(pg_dsn: str) -> Iterator[dict[str, str]]:
    suffix = uuid.uuid4().hex[:10]
    names = {
        "config": f"esra_t_mcfg_{suffix}",
        "secrets": f"esra_t_msec_{suffix}",
        "audit": f"esra_t_maud_{suffix}",
    }
    yield names
    with admin(pg_dsn) as conn:
        for name in names.values():
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _as(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    return f"postgresql://{role}@{host}:{port}/{parts.path.lstrip('/')}"


def _settings(tmp_path: Path, dsn: str, role: str, schemas: dict[str, str]) -> Path:
    parts = urlsplit(dsn)
    keyring = tmp_path / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    (tmp_path / "acme.json").write_text(json.dumps({"tenant_id": TENANT, "version": "file-1"}))
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    path = tmp_path / "esra.toml"
    path.write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{TENANT}"
config = "acme.json"
outbound_hosts = ["{parts.hostname}:{parts.port or 5432}"]

[state]
database = "{_as(dsn, role)}"
config_schema = "{schemas["config"]}"
secrets_schema = "{schemas["secrets"]}"
audit_schema = "{schemas["audit"]}"
apply_schemas = false

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"
"""
    )
    return path


def _migrate(settings: Path, owner: str, role: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-m",
            "esra.starlette._cli",
            "migrate",
            "--config",
            str(settings),
            "--owner-database",
            owner,
            "--grant-to",
            role,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _refused(dsn: str, statement: sql.Composed) -> bool:
    """Whether the server refuses ``statement`` to the connecting role for lack of rights."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute(statement)
        except psycopg.errors.InsufficientPrivilege:
            return True
    return False


async def _refused_at_start(state: StateSettings) -> None:
    """The host does not start on ``state``, and says to run ``esra migrate``."""
    with pytest.raises(StateDatabaseError, match="esra migrate"):
        async with contextlib.AsyncExitStack() as stack:
            await open_state(stack, state, policies={}, clock=FakeClock())


async def test_the_host_runs_on_schemas_an_owner_applied_and_cannot_rewrite_them(
    pg_dsn: str, host_role: str, schemas: dict[str, str], tmp_path: Path
) -> None:
    settings_file = _settings(tmp_path, pg_dsn, host_role, schemas)
    state = load_settings(settings_file, model_key=False).state

    await _refused_at_start(state)

    first = _migrate(settings_file, pg_dsn, host_role)
    assert first.returncode == 0, first.stderr
    assert f"{schemas['audit']}: applied version 1" in first.stdout
    assert f"granted {host_role}" in first.stdout
    again = _migrate(settings_file, pg_dsn, host_role)
    assert again.returncode == 0, again.stderr
    assert f"{schemas['config']}: already at version {CONFIG_SCHEMA_VERSION}" in again.stdout

    async with contextlib.AsyncExitStack() as stack:
        durable = await open_state(stack, state, policies={}, clock=FakeClock())
        assert durable.workspaces is not None
        assert durable.audit_reader is not None
        workspaces: WorkspaceStore = durable.workspaces
        harness = Admin(store=workspaces, vault=durable.secrets)
        await run_until(harness, 4)  # secret, model, policy, publish: every state table
        for record in harness.audit.records:
            await durable.audit.record(record)
        assert await durable.secrets.resolve(TENANT, SECRET_REF) == SECRET_VALUE
        assert await workspaces.published(TENANT) is not None
        # The host role records its document stores' lifecycle state (``store_states``).
        assert isinstance(workspaces, PostgresConfigStore)
        enabled = StoreState(StoreStatus.ENABLED, T0)
        await workspaces.write_store_state(TENANT, enabled)
        await workspaces.write_store_state(TENANT, enabled)
        assert await workspaces.read_store_state(TENANT) == enabled
        flush = getattr(durable.audit, "flush", None)
        assert callable(flush)
        await flush()
        page = await durable.audit_reader.query(AuditQuery(TENANT, limit=1000))
        assert AuditEvent.ADMIN_EXPOSURE_PUBLISH in {r.event for r in page.records}

    host = _as(pg_dsn, host_role)
    records = sql.Identifier(schemas["audit"], "records")
    for statement in (
        sql.SQL("UPDATE {} SET outcome = 'rewritten'").format(records),
        sql.SQL("DELETE FROM {}").format(records),
        sql.SQL("TRUNCATE {}").format(records),
        sql.SQL("DROP TABLE {}").format(records),
        sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schemas["audit"])),
        sql.SQL("DELETE FROM {}").format(sql.Identifier(schemas["secrets"], "secrets")),
        sql.SQL("ALTER TABLE {} DISABLE TRIGGER ALL").format(
            sql.Identifier(schemas["config"], "changes")
        ),
    ):
        assert _refused(host, statement), statement.as_string(None)
    with admin(pg_dsn) as conn:
        count = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE outcome = 'rewritten'").format(records)
        ).fetchone()
    assert count == (0,)


async def test_a_host_refuses_schemas_behind_this_release(
    pg_dsn: str, host_role: str, schemas: dict[str, str], tmp_path: Path
) -> None:
    """Schemas an owner applied for an older release (the configuration schema at version
    1, before the store states) stop the host at start with the command that fixes them,
    rather than failing the first request that reaches the new table."""
    settings_file = _settings(tmp_path, pg_dsn, host_role, schemas)
    first = _migrate(settings_file, pg_dsn, host_role)
    assert first.returncode == 0, first.stderr
    with admin(pg_dsn) as conn:
        versions = sql.Identifier(schemas["config"], "schema_version")
        conn.execute(sql.SQL("DELETE FROM {} WHERE version > 1").format(versions))
        for table in ("store_states", "audit_outbox"):
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schemas["config"], table)))
    state = load_settings(settings_file, model_key=False).state
    await _refused_at_start(state)
    again = _migrate(settings_file, pg_dsn, host_role)
    assert again.returncode == 0, again.stderr
    assert f"{schemas['config']}: applied version {CONFIG_SCHEMA_VERSION}" in again.stdout
    async with contextlib.AsyncExitStack() as stack:
        durable = await open_state(stack, state, policies={}, clock=FakeClock())
        assert durable.workspaces is not None
        await durable.workspaces.write_store_state(TENANT, StoreState(StoreStatus.ENABLED, T0))
