"""``esra serve --config`` serves every installed engine from settings (issue 14).

It used to open SQLite sources only: a review had to compose a host by hand in Python to
serve a PostgreSQL source. Here a real ``esra serve`` process reads one TOML file naming a
PostgreSQL source (a table with a ``tsvector`` column) and a MariaDB source (a ``FULLTEXT``
index); the connection templates carry only ``${secret:env:...}`` references, resolved
through the tenant's secret policy, and the hosts pass the tenant's ``outbound_hosts``. One
search through ``/mcp`` returns results from both servers.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from esra.core.config import (
    AccessPolicy,
    BindingMode,
    ConfigSnapshot,
    FieldType,
    SourceBinding,
    dump_snapshot,
)
from tests._databases import require_dsn
from tests._serve_process import serve_process
from tests.core.factories import make_capability, make_exposure, make_mapping, make_source
from tests.mysql.conftest import DSN_VARIABLE as MYSQL_DSN_VARIABLE
from tests.mysql.conftest import Server, _server, create_database, drop_database
from tests.mysql.conftest import seed_table as seed_mysql
from tests.postgres.conftest import admin, pg_dsn  # noqa: F401 - the fixture
from tests.postgres.conftest import seed_table as seed_postgres
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

pytestmark = pytest.mark.integration

TENANT = "acme-engines"
COLUMNS = [("col_id", FieldType.TEXT), ("col_title", FieldType.TEXT), ("col_body", FieldType.TEXT)]


def _rows(prefix: str, engine: str) -> list[dict[str, object]]:
    return [
        {
            "col_id": f"{prefix}-1",
            "col_title": f"{engine} warranty claim for a cracked carbon frame",
            "col_body": "The customer reports a cracked carbon frame after a warranty inspection.",
        },
        {
            "col_id": f"{prefix}-2",
            "col_title": f"{engine} invoice for brake pads",
            "col_body": "Brake pads ordered for the spring service.",
        },
    ]


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:  # noqa: F811
    name = f"esra_test_engines_{uuid.uuid4().hex[:12]}"
    with admin(pg_dsn) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield name
    with admin(pg_dsn) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture
def server() -> Server:
    return _server()


@pytest.fixture
def maria_database(server: Server) -> Iterator[str]:
    name = create_database(server)
    yield name
    drop_database(server, name)


def _snapshot(pg_url: str, maria_url: str, pg_schema: str) -> ConfigSnapshot:
    pg_mapping = make_mapping(
        "m-claims",
        source_id="claims",
        tenant_id=TENANT,
        relation="claims",
        schema=pg_schema,
        text_index="search_tsv",
    )
    maria_mapping = make_mapping(
        "m-tickets",
        source_id="tickets",
        tenant_id=TENANT,
        relation="tickets",
        text_index="ft_tickets",
    )
    sources = (
        make_source(
            "claims",
            tenant_id=TENANT,
            name="Warranty claims (PostgreSQL)",
            provider_kind="postgres",
            connection_ref=pg_url,
        ),
        make_source(
            "tickets",
            tenant_id=TENANT,
            name="Support tickets (MariaDB)",
            provider_kind="mariadb",
            connection_ref=maria_url,
        ),
    )
    capability = make_capability(
        [
            SourceBinding("claims", BindingMode.MANDATORY),
            SourceBinding("tickets", BindingMode.MANDATORY),
        ],
        tenant_id=TENANT,
        name="Warranty and support records",
    )
    exposure = make_exposure(tenant_id=TENANT, slug="warranty")
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="v1",
        sources=sources,
        mappings=(pg_mapping, maria_mapping),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _template(scheme: str, dsn: str, user: str, variable: str, database: str) -> tuple[str, str]:
    """A template whose password is the reference ``${secret:env:variable}``, and host:port."""
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port
    url = f"{scheme}://{user}:${{secret:env:{variable}}}@{host}:{port}/{database}"
    return url, f"{host}:{port}"


@pytest.fixture
def maria_reader(server: Server, maria_database: str) -> Iterator[tuple[str, str]]:
    """A read-only MariaDB principal with a password, for this test's database only.

    (No bind arguments: the seeding driver would read the host pattern's ``%`` as a
    placeholder.)
    """
    user, password = f"esra_rd_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cursor.execute(f"GRANT SELECT ON `{maria_database}`.* TO '{user}'@'%'")
    yield user, password
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")


async def test_serve_config_answers_from_postgres_and_mariadb(
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
    pg_schema: str,
    maria_database: str,
    maria_reader: tuple[str, str],
) -> None:
    pg_user = urlsplit(pg_dsn).username or "postgres"
    pg_url, pg_host = _template(
        "postgresql", pg_dsn, pg_user, "ESRA_ENGINES_PG_PASSWORD", urlsplit(pg_dsn).path[1:]
    )
    # The same server the fixtures seeded: the variable, else the usual local address.
    maria_dsn = require_dsn(MYSQL_DSN_VARIABLE)
    maria_url, maria_host = _template(
        "mariadb", maria_dsn, maria_reader[0], "ESRA_ENGINES_MY_PASSWORD", maria_database
    )
    snapshot = _snapshot(pg_url, maria_url, pg_schema)
    seed_postgres(pg_dsn, pg_schema, snapshot.mappings[0], COLUMNS, _rows("pg", "PostgreSQL"))
    seed_mysql(_server(), maria_database, snapshot.mappings[1], COLUMNS, _rows("my", "MariaDB"))

    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(snapshot)))
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
outbound_hosts = ["{pg_host}", "{maria_host}"]

[tenants.secrets]
env_prefixes = ["ESRA_ENGINES_"]

[tenants.sources.claims]
pool_size = 2
search_path = "{pg_schema}"

[tenants.sources.tickets]
pool_size = 2
"""
    )
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        # The local server trusts its loopback clients, so this value is never checked there.
        "ESRA_ENGINES_PG_PASSWORD": urlsplit(pg_dsn).password or "unused-by-trust-auth",
        "ESRA_ENGINES_MY_PASSWORD": maria_reader[1],
    }
    now = int(time.time())
    token = idp().token(esra_tenant=TENANT, iat=now, nbf=now, exp=now + 600)
    config = str(tmp_path / "esra.toml")
    with serve_process(
        tmp_path / "serve.log", "--config", config, env=env, stop="interrupt"
    ) as host:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(f"{host.url}/mcp", http_client=http)) as client,
        ):
            tools = [tool.name for tool in (await client.list_tools()).tools]
            result = await client.call_tool(
                "esra_warranty", {"prompt": "cracked carbon frame warranty"}
            )
    assert tools == ["esra_warranty"]
    assert not result.is_error, result.content
    output = result.structured_content
    assert output is not None
    sources = {item["source"] for item in output["results"]}
    assert sources == {"Warranty claims (PostgreSQL)", "Support tickets (MariaDB)"}, output
    titles = {item["title"] for item in output["results"]}
    assert "PostgreSQL warranty claim for a cracked carbon frame" in titles
    assert "MariaDB warranty claim for a cracked carbon frame" in titles
    assert output["warnings"] == [], output["warnings"]
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert "Traceback" not in log
    # The password came from the environment through the SecretStore, never from a file.
    assert maria_reader[1] not in log
    assert maria_reader[1] not in (tmp_path / "acme.json").read_text()
