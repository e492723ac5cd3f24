"""A secret write killed between its workspace save and its store write names nothing.

Found by a hostile review of durability (a real ``esra serve`` on PostgreSQL, killed with
SIGKILL): the workspace recorded the write, the secret table held nothing, and a source
naming the secret was modelled — and could be published — on a secret nobody can resolve.
Modelling and publication now ask the secret store, not only the workspace's record.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from psycopg import sql

from tests._serve_process import serve_process
from tests.core.factories import make_mapping, make_source
from tests.postgres._killed_secret_write import kill_secret_write_at
from tests.postgres.test_durable_state_postgres import (  # noqa: F401 - the fixture
    TENANT,
    _body,
    _settings,
    _token,
    schemas,
)

pytestmark = pytest.mark.integration


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
    with serve_process(log, "--config", str(config), env=env) as host:
        # The host is stopped between its workspace save and its secret write, where a
        # kill -9 may land in production.
        await kill_secret_write_at(
            host,
            pg_dsn=pg_dsn,
            config_schema=schemas["config"],
            locked=secrets_table,
            locked_schema=schemas["secrets"],
            log=log,
            value="never-written",
        )

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
