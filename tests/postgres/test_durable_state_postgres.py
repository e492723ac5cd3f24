"""A ``[state]``-on-PostgreSQL host keeps configuration, secrets and audit across ``kill -9``.

Issue 14's test: publish a new PostgreSQL source and exposure through the admin API of a
real ``esra serve --config`` process whose ``[state] database`` is PostgreSQL (its password a
``${secret:env:...}`` reference), ``kill -9`` it, restart it → the tool is served and
answers (its connection secret, written through the API, still resolves), the draft history
is there, and every audit record written before the kill is still readable. A ``pg_dump``
of the state schemas holds no plaintext secret.
"""

from __future__ import annotations

import base64
import json
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from esra.core._config.converter import CONVERTER
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    ConfigSnapshot,
    FieldType,
    SourceBinding,
    dump_snapshot,
)
from esra.postgres._config_store import PostgresConfigStore
from tests._serve_process import kill_9, serve_process
from tests.core.factories import make_capability, make_exposure, make_mapping, make_source
from tests.postgres.conftest import admin, seed_table
from tests.starlette._tokens import AUDIENCE, ISSUER, idp
from tests.starlette.test_durable_state import audit_records

pytestmark = pytest.mark.integration

TENANT = "acme-durable"
SECRET = f"Pg-Plaintext-{uuid.uuid4().hex}"
COLUMNS = [("col_id", FieldType.TEXT), ("col_title", FieldType.TEXT), ("col_body", FieldType.TEXT)]
ROWS = [
    {
        "col_id": "c-1",
        "col_title": "Warranty claim for a cracked carbon frame",
        "col_body": "The customer reports a cracked carbon frame after an inspection.",
    },
    {
        "col_id": "c-2",
        "col_title": "Invoice for brake pads",
        "col_body": "Brake pads ordered for the spring service.",
    },
]


@pytest.fixture
def schemas(pg_dsn: str) -> Iterator[dict[str, str]]:
    """Fresh schemas for the state (config, secrets, audit) and the source's table."""
    suffix = uuid.uuid4().hex[:10]
    names = {
        "config": f"esra_t_cfg_{suffix}",
        "secrets": f"esra_t_sec_{suffix}",
        "audit": f"esra_t_aud_{suffix}",
        "data": f"esra_t_data_{suffix}",
    }
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names["data"])))
    yield names
    with admin(pg_dsn) as conn:
        for name in names.values():
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _token(*roles: str, subject: str = "ops", client: str = "app-1") -> str:
    now = int(time.time())
    return idp().token(
        sub=subject,
        azp=client,
        esra_tenant=TENANT,
        esra_roles=list(roles),
        iat=now,
        nbf=now,
        exp=now + 900,
    )


def _body(part: object) -> dict[str, Any]:
    body: dict[str, Any] = CONVERTER.unstructure(part)
    del body["tenant_id"]
    return body


def _settings(tmp_path: Path, dsn: str, schemas: dict[str, str]) -> tuple[Path, str]:
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    user = parts.username or "postgres"
    database = parts.path.lstrip("/")
    state = f"postgresql://{user}:${{secret:env:ESRA_TEST_STATE_PASSWORD}}@{host}:{port}/{database}"
    keyring = tmp_path / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    empty = ConfigSnapshot(tenant_id=TENANT, version="file-1")
    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(empty)))
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    (tmp_path / "esra.toml").write_text(
        f"""
[[issuers]]
issuer = "{ISSUER}"
audience = "{AUDIENCE}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{TENANT}"
config = "acme.json"
outbound_hosts = ["{host}:{port}"]

[state]
database = "{state}"
config_schema = "{schemas["config"]}"
secrets_schema = "{schemas["secrets"]}"
audit_schema = "{schemas["audit"]}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"
"""
    )
    template = f"postgresql://{user}:${{secret:claims-pw}}@{host}:{port}/{database}"
    return tmp_path / "esra.toml", template


async def _answer(url: str, token: str) -> tuple[set[str], list[dict[str, Any]] | None]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        names = {tool.name for tool in (await client.list_tools()).tools}
        if "esra_claims" not in names:
            return names, None
        found = await client.call_tool("esra_claims", {"prompt": "cracked carbon frame warranty"})
        if found.structured_content is None:
            return names, None
        return names, list(found.structured_content["results"])


async def _assert_history_and_no_plaintext(pg_dsn: str, schemas: dict[str, str]) -> None:
    """The chain's history is in the database; a ``pg_dump`` of the state holds no secret."""
    store = await PostgresConfigStore.open(pg_dsn, schema=schemas["config"], apply_schema=False)
    try:
        history = [change.action for change in await store.history(TENANT)]
    finally:
        await store.close()
    assert history[-1] == "esra.admin.exposure.publish"
    assert "esra.admin.source.model" in history
    dump = subprocess.run(  # noqa: S603
        [  # noqa: S607
            "pg_dump",
            "--data-only",
            *(f"--schema={schemas[name]}" for name in ("config", "secrets", "audit")),
            pg_dsn,
        ],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    assert b"claims-pw" in dump  # the dump does hold the state: the reference, not its value
    assert SECRET.encode() not in dump
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (rows,) = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schemas["secrets"], "secrets"))
        ).fetchone() or (0,)
    assert rows == 1


async def test_a_postgres_state_host_keeps_its_state_across_kill_9(
    tmp_path: Path,
    pg_dsn: str,
    schemas: dict[str, str],
) -> None:
    config, template = _settings(tmp_path, pg_dsn, schemas)
    mapping = make_mapping(
        "m-claims",
        source_id="claims",
        tenant_id=TENANT,
        relation="claims",
        schema=schemas["data"],
        text_index="search_tsv",
    )
    seed_table(pg_dsn, schemas["data"], mapping, COLUMNS, ROWS)
    source = make_source(
        "claims",
        tenant_id=TENANT,
        name="Warranty claims",
        description="Warranty claims about bicycle frames and parts.",
        provider_kind="postgres",
        connection_ref=template,
    )
    capability = make_capability(
        [SourceBinding("claims", BindingMode.MANDATORY)], tenant_id=TENANT, name="Claims"
    )
    exposure = make_exposure(tenant_id=TENANT, slug="claims", published=False)
    roles = ("SECURITY_MANAGE", "ESRA_DATA_MANAGE", "GOVERNANCE_MANAGE", "ESRA_EXPOSURE_MANAGE")
    tokens = {role: _token(role, subject=role.lower()) for role in roles}
    caller = _token()
    env = {"ESRA_TEST_STATE_PASSWORD": urlsplit(pg_dsn).password or "unused-by-trust-auth"}
    log = tmp_path / "serve.log"

    with serve_process(log, "--config", str(config), env=env) as host:
        admin_url = f"{host.url}/admin/v1"
        clients = {
            role: httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            for role, token in tokens.items()
        }
        try:
            steps = [
                (clients["SECURITY_MANAGE"], "secrets/claims-pw", {"value": SECRET}),
                (
                    clients["ESRA_DATA_MANAGE"],
                    "sources/claims",
                    {"source": _body(source), "mappings": [_body(mapping)]},
                ),
                (clients["ESRA_DATA_MANAGE"], f"capabilities/{capability.id}", _body(capability)),
                (
                    clients["GOVERNANCE_MANAGE"],
                    "access-policies/claims",
                    _body(AccessPolicy.matching(exposure)),
                ),
                (clients["ESRA_EXPOSURE_MANAGE"], "exposures/claims", _body(exposure)),
            ]
            for client, path, body in steps:
                answer = await client.put(f"{admin_url}/{path}", json=body)
                assert answer.status_code == 200, (path, answer.text)
            published = await clients["ESRA_EXPOSURE_MANAGE"].post(
                f"{admin_url}/exposures/claims/publish"
            )
            assert published.status_code == 200, published.text
            names, _live = await _answer(host.url, caller)
            assert "esra_claims" in names  # published: listed at once on this host
            before = await audit_records(clients["GOVERNANCE_MANAGE"], host.url)
        finally:
            for client in clients.values():
                await client.aclose()
        kill_9(host)

    assert {"esra.admin.secret.write", "esra.admin.exposure.publish", "esra.invoke"} <= {
        r["event"] for r in before
    }

    with serve_process(log, "--config", str(config), env=env) as host:
        names, results = await _answer(host.url, caller)
        assert "esra_claims" in names
        # The source was opened from the published configuration and its stored secret
        # resolved: the search answered from PostgreSQL.
        assert results is not None, log.read_text(errors="replace")[-4000:]
        assert any("carbon frame" in str(r["title"]).lower() for r in results), results
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {tokens['GOVERNANCE_MANAGE']}"}
        ) as governor:
            after = await audit_records(governor, host.url)
        host.process.send_signal(signal.SIGINT)
        host.process.wait(timeout=60)

    def key(record: dict[str, Any]) -> tuple[str, str, str]:
        return (record["at"], record["event"], record["correlationId"])

    assert {key(r) for r in before} <= {key(r) for r in after}
    await _assert_history_and_no_plaintext(pg_dsn, schemas)
    assert SECRET not in log.read_text(errors="replace")
