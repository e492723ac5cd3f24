"""``/readyz`` over a real PostgreSQL state database that stops answering.

The state database is reached as a role of its own; "unreachable" is that role refused
login with its sessions terminated — the server stays up for every other test. In process,
a ``PostgresConfigStore`` behind ``create_app``; then a real ``esra serve --config``
process whose ``[state]`` (configuration, secrets, audit) is on PostgreSQL. Ready first;
503 naming the failing checks afterwards, with no DSN, role, host or tenant in the body.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from psycopg import sql

from esra.core._static_config import StaticConfigRepository
from esra.core.config import ConfigSnapshot, dump_snapshot
from esra.core.testing import FakeLanguageModel, InMemoryAuditSink
from esra.postgres._config_store import PostgresConfigStore
from esra.postgres._pool import open_pool
from esra.starlette._app import create_app
from tests._serve_process import serve_process
from tests.postgres.conftest import admin
from tests.starlette._tokens import AUDIENCE, ISSUER, idp
from tests.starlette._world import http

TENANT = "acme-readiness"
FAILED = {"timeout", "unavailable"}  # which, depends on whether the pool had noticed yet


@pytest.fixture
def state_role(pg_dsn: str) -> Iterator[str]:
    """A login role that may create schemas; everything it owns is dropped afterwards."""
    role = f"esra_t_ready_{uuid.uuid4().hex[:10]}"
    database = urlsplit(pg_dsn).path.lstrip("/")
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(role)
            )
        )
    yield role
    with admin(pg_dsn) as conn:
        _terminate(conn, role)
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _terminate(conn: psycopg.Connection[tuple[object, ...]], role: str) -> None:
    # Waits (up to 5 s each) until the backends have gone, so no later statement races them.
    conn.execute(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s",
        (role,),
    )


def _cut_off(pg_dsn: str, role: str) -> None:
    """The role may no longer log in, and its open sessions are ended."""
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(role)))
        _terminate(conn, role)


def _as_role(dsn: str, role: str) -> str:
    parts = urlsplit(dsn)
    return parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}").geturl()


def _assert_names_nothing(body: str, pg_dsn: str, role: str) -> None:
    for secret in (role, urlsplit(pg_dsn).hostname or "127.0.0.1", "postgresql", TENANT):
        assert secret not in body, secret


async def test_an_unreachable_config_database_makes_the_host_not_ready(
    pg_dsn: str, state_role: str
) -> None:
    """A ``PostgresConfigStore`` behind the host: ready, then 503 ``config_database``."""
    pool = await open_pool(
        _as_role(pg_dsn, state_role), kwargs=None, name="esra-config", min_size=1, max_size=2
    )
    try:
        app = create_app(
            config=StaticConfigRepository(),
            providers={},
            model=FakeLanguageModel(),
            audit=InMemoryAuditSink(),
            issuers=[idp().trusted()],
            resource_url=AUDIENCE,
            workspaces=PostgresConfigStore(pool),
        )
        async with http(app) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"status": "ready", "checks": {"config_database": "ok"}}
            _cut_off(pg_dsn, state_role)
            refused = await client.get("/readyz")
    finally:
        await pool.close()
    assert refused.status_code == 503
    body = refused.json()
    assert body["status"] == "not_ready"
    assert set(body["checks"]) == {"config_database"}
    assert body["checks"]["config_database"] in FAILED
    _assert_names_nothing(refused.text, pg_dsn, state_role)


def _settings(tmp_path: Path, state_dsn: str, suffix: str) -> Path:
    keyring = tmp_path / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    empty = ConfigSnapshot(tenant_id=TENANT, version="file-1")
    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(empty)))
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    settings = tmp_path / "esra.toml"
    settings.write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{TENANT}"
config = "acme.json"

[state]
database = "{state_dsn}"
config_schema = "esra_t_rcfg_{suffix}"
secrets_schema = "esra_t_rsec_{suffix}"
audit_schema = "esra_t_raud_{suffix}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"
"""
    )
    return settings


@pytest.mark.integration
async def test_a_served_host_whose_state_database_goes_away_is_not_ready(
    tmp_path: Path, pg_dsn: str, state_role: str
) -> None:
    """``esra serve --config`` on a PostgreSQL state: ``/readyz`` 200 with the
    configuration database and the audit log; both 503 once the database refuses the host,
    while ``/healthz`` (liveness) still answers."""
    settings = _settings(tmp_path, _as_role(pg_dsn, state_role), uuid.uuid4().hex[:10])
    with serve_process(tmp_path / "serve.log", "--config", str(settings)) as host:
        async with httpx2.AsyncClient(base_url=host.url) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json() == {
                "status": "ready",
                "checks": {"config_database": "ok", "audit": "ok"},
            }
            _cut_off(pg_dsn, state_role)
            refused = await client.get("/readyz")
            alive = await client.get("/healthz")
    assert refused.status_code == 503, refused.text
    body = refused.json()
    assert body["status"] == "not_ready"
    assert set(body["checks"]) == {"config_database", "audit"}
    assert body["checks"]["config_database"] in FAILED
    assert body["checks"]["audit"] in FAILED
    assert alive.status_code == 200
    _assert_names_nothing(refused.text, pg_dsn, state_role)
