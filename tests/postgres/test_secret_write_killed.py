"""A secret write killed between its workspace save and its store write names nothing.

Found by a hostile review of durability (a real ``esra serve`` on PostgreSQL, killed with
SIGKILL): the workspace recorded the write, the secret table held nothing, and a source
naming the secret was modelled — and could be published — on a secret nobody can resolve.
Modelling and publication now ask the secret store, not only the workspace's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from psycopg import sql

from esra.postgres._config_store import PostgresConfigStore
from tests._serve_process import kill_9, serve_process
from tests.core.factories import make_mapping, make_source
from tests.postgres.test_durable_state_postgres import (  # noqa: F401 - the fixture
    TENANT,
    _body,
    _settings,
    _token,
    schemas,
)

pytestmark = pytest.mark.integration


async def _history(pg_dsn: str, schema: str) -> list[str]:
    store = await PostgresConfigStore.open(pg_dsn, schema=schema, apply_schema=False)
    try:
        return [change.action for change in await store.history(TENANT)]
    finally:
        await store.close()


async def test_a_secret_write_killed_after_its_save_leaves_no_secret_a_source_can_name(
    tmp_path: Path,
    pg_dsn: str,
    schemas: dict[str, str],  # noqa: F811
) -> None:
    """docs/administration.md: a secret write that fails after the workspace was saved "is
    withdrawn again in a further version, so the workspace never names a secret that was not
    written" (and the chain's docstring: "no source can be modelled on a secret that was
    never written"). A host killed with SIGKILL between the two — the workspace saved, the
    secret table's write not yet done — leaves exactly that: after the restart the workspace
    names ``claims-pw`` as written, the secret table holds nothing, and a source naming it
    is modelled (200) and would be published on a secret nobody can resolve."""
    config, template = _settings(tmp_path, pg_dsn, schemas)
    env = {"ESRA_TEST_STATE_PASSWORD": urlsplit(pg_dsn).password or "unused-by-trust-auth"}
    log = tmp_path / "serve.log"
    secrets_table = sql.Identifier(schemas["secrets"], "secrets")
    security = {"Authorization": f"Bearer {_token('SECURITY_MANAGE', subject='sec')}"}
    with serve_process(log, "--config", str(config), env=env) as host:
        url = f"{host.url}/admin/v1"
        # Hold the secret table's writes (reads go on): the host is stopped between its
        # workspace save and its secret write, where a kill -9 may land in production.
        holder = psycopg.connect(pg_dsn)
        try:
            holder.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(secrets_table))
            async with httpx2.AsyncClient(headers=security, timeout=60) as http:
                write = asyncio.create_task(
                    http.put(f"{url}/secrets/claims-pw", json={"value": "never-written"})
                )
                deadline = time.monotonic() + 60
                while "esra.admin.secret.write" not in await _history(pg_dsn, schemas["config"]):
                    assert time.monotonic() < deadline, log.read_text(errors="replace")
                    assert not write.done(), write.result().text
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.5)
                assert not write.done()  # the host waits on the secret table
                kill_9(host)
                # The server would still run the killed host's blocked INSERT once the lock
                # goes (it notices a vanished client only when it answers); end it, as if the
                # kill had landed a moment earlier, before the statement was sent.
                with psycopg.connect(pg_dsn, autocommit=True) as killer:
                    killer.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE wait_event_type = 'Lock' AND query ILIKE %s",
                        (f"%{schemas['secrets']}%",),
                    )
                write.cancel()
                with contextlib.suppress(BaseException):
                    await write
        finally:
            holder.rollback()
            holder.close()

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        counted = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(secrets_table))
        assert counted.fetchone() == (0,)  # the secret was never written

    mapping = make_mapping(
        "m-claims", source_id="claims", tenant_id=TENANT, relation="claims",
        schema=schemas["data"], text_index="search_tsv",
    )  # fmt: skip
    source = make_source(
        "claims", tenant_id=TENANT, provider_kind="postgres", connection_ref=template
    )  # names ${secret:claims-pw}
    data = {"Authorization": f"Bearer {_token('ESRA_DATA_MANAGE', subject='data')}"}
    with serve_process(log, "--config", str(config), env=env) as host:
        async with httpx2.AsyncClient(headers=data, timeout=60) as http:
            view = (await http.get(f"{host.url}/admin/v1/config")).json()
            modelled = await http.put(
                f"{host.url}/admin/v1/sources/claims",
                json={"source": _body(source), "mappings": [_body(mapping)]},
            )
    assert modelled.status_code != 200, (
        "a source was modelled on a secret that was never written; the workspace says "
        f"{view.get('secrets', view)}"
    )
    assert (modelled.status_code, modelled.json()["error"]["code"]) == (
        422,
        "ESRA_CONFIGURATION_INVALID",
    ), modelled.text
