"""Two ``esra serve`` processes on one PostgreSQL state database: a publication on A is served
by B without a restart.

Both hosts run the same ``--config`` settings, so they share the ``[state]`` database (its
configuration, secret and audit schemas). A new PostgreSQL source, its secret, a capability, an
access policy and an exposure are published through host A's admin API; host B — which
started before any of it existed — then lists the tool and its search answers from
PostgreSQL, its provider opened by B's ``ConfigFollower`` from the publication A stored.

With ``config_poll_s = 3600`` host B cannot have found the publication by polling within the
test's safety deadline: only the PostgreSQL notification (``ConfigPublicationListener``) makes
it sync, so that variant proves the LISTEN path; the default-like variant polls every second.
Neither asserts how long it took: B is asked again until it serves the tool, with a generous
deadline as a safety net only.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from psycopg import sql

from esra.core.config import AccessPolicy, BindingMode, SourceBinding
from tests._serve_process import serve_process
from tests.core.factories import make_capability, make_exposure, make_mapping, make_source
from tests.postgres.conftest import admin, seed_table
from tests.postgres.test_durable_state_postgres import (
    COLUMNS,
    ROWS,
    SECRET,
    TENANT,
    _answer,
    _body,
    _settings,
    _token,
)

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

# Generous: B syncs within its poll interval (or one notification) plus one sync.
SAFETY_DEADLINE_S = 60.0


@pytest.fixture
def live_schemas(pg_dsn: str) -> Iterator[dict[str, str]]:
    """Fresh state schemas (config, secrets, audit) and the source's data schema."""
    suffix = uuid.uuid4().hex[:10]
    names = {
        "config": f"esra_t_lcfg_{suffix}",
        "secrets": f"esra_t_lsec_{suffix}",
        "audit": f"esra_t_laud_{suffix}",
        "data": f"esra_t_ldata_{suffix}",
    }
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names["data"])))
    yield names
    with admin(pg_dsn) as conn:
        for name in names.values():
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _with_poll(config: Path, poll_s: str) -> None:
    """Set ``[state] config_poll_s`` in the settings ``_settings`` wrote."""
    text = config.read_text()
    marker = 'audit_schema = "'
    line_end = text.index("\n", text.index(marker))
    config.write_text(f"{text[:line_end]}\nconfig_poll_s = {poll_s}{text[line_end:]}")


async def _publish_claims(admin_url: str, template: str, schemas: dict[str, str]) -> None:
    """Model the ``claims`` source (its secret too) on one host's admin API and publish it."""
    mapping = make_mapping(
        "m-claims",
        source_id="claims",
        tenant_id=TENANT,
        relation="claims",
        schema=schemas["data"],
        text_index="search_tsv",
    )
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
    clients = {
        role: httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {_token(role, subject=role.lower())}"}
        )
        for role in roles
    }
    try:
        steps: list[tuple[str, str, dict[str, Any]]] = [
            ("SECURITY_MANAGE", "secrets/claims-pw", {"value": SECRET}),
            (
                "ESRA_DATA_MANAGE",
                "sources/claims",
                {"source": _body(source), "mappings": [_body(mapping)]},
            ),
            ("ESRA_DATA_MANAGE", f"capabilities/{capability.id}", _body(capability)),
            ("GOVERNANCE_MANAGE", "access-policies/claims", _body(AccessPolicy.matching(exposure))),
            ("ESRA_EXPOSURE_MANAGE", "exposures/claims", _body(exposure)),
        ]
        for role, path, body in steps:
            answer = await clients[role].put(f"{admin_url}/{path}", json=body)
            assert answer.status_code == 200, (path, answer.text)
        published = await clients["ESRA_EXPOSURE_MANAGE"].post(
            f"{admin_url}/exposures/claims/publish"
        )
        assert published.status_code == 200, published.text
    finally:
        for client in clients.values():
            await client.aclose()


async def _served_by(url: str, caller: str) -> list[dict[str, Any]] | None:
    """The results of B's ``esra_claims`` search, asked again until it answers (or the
    safety deadline passes: ``None``)."""
    deadline = time.monotonic() + SAFETY_DEADLINE_S
    while time.monotonic() < deadline:
        names, results = await _answer(url, caller)
        if "esra_claims" in names and results is not None:
            return results
        await asyncio.sleep(0.2)
    return None


@pytest.mark.parametrize(
    "poll_s",
    [
        pytest.param("1.0", id="polling"),
        pytest.param("3600", id="notified"),
    ],
)
async def test_a_publication_on_one_host_is_served_by_another_without_a_restart(
    tmp_path: Path, pg_dsn: str, live_schemas: dict[str, str], poll_s: str
) -> None:
    config, template = _settings(tmp_path, pg_dsn, live_schemas)
    _with_poll(config, poll_s)
    seed_table(
        pg_dsn,
        live_schemas["data"],
        make_mapping(
            "m-claims",
            source_id="claims",
            tenant_id=TENANT,
            relation="claims",
            schema=live_schemas["data"],
            text_index="search_tsv",
        ),
        COLUMNS,
        ROWS,
    )
    env = {"ESRA_TEST_STATE_PASSWORD": urlsplit(pg_dsn).password or "unused-by-trust-auth"}
    caller = _token()
    log_a, log_b = tmp_path / "serve-a.log", tmp_path / "serve-b.log"

    with (
        serve_process(log_a, "--config", str(config), env=env) as host_a,
        serve_process(log_b, "--config", str(config), env=env) as host_b,
    ):
        names, _results = await _answer(host_b.url, caller)
        assert "esra_claims" not in names  # nothing published yet
        await _publish_claims(f"{host_a.url}/admin/v1", template, live_schemas)

        results = await _served_by(host_b.url, caller)
        assert results is not None, log_b.read_text(errors="replace")[-4000:]
        # B opened the new source's provider from A's publication, resolved the secret A
        # stored, and answered from PostgreSQL.
        assert any("carbon frame" in str(r["title"]).lower() for r in results), results
        # A served it at once (its own publication).
        names_a, results_a = await _answer(host_a.url, caller)
        assert "esra_claims" in names_a
        assert results_a is not None
    for log in (log_a, log_b):
        text = log.read_text(errors="replace")
        assert SECRET not in text
        assert "Traceback" not in text
