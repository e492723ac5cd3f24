"""A real ``esra serve`` on PostgreSQL killed between a change and its audit record.

The admin chain saved a change and then handed its record to the audit sink; a host killed
(SIGKILL) while that record's write waited left the change applied and no audit record. The
record is now saved with the change, in the configuration schema's audit outbox, and the next
host delivers it when it starts.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import psycopg
import pytest
from psycopg import sql

from tests._serve_process import serve_process
from tests.postgres._killed_secret_write import kill_secret_write_at
from tests.postgres.test_durable_state_postgres import (  # noqa: F401 - the fixture
    _settings,
    _token,
    schemas,
)
from tests.starlette.test_durable_state import audit_records

pytestmark = pytest.mark.integration


async def test_a_secret_write_killed_before_its_audit_record_is_audited_after_the_restart(
    tmp_path: Path,
    pg_dsn: str,
    schemas: dict[str, str],  # noqa: F811
) -> None:
    config, _template = _settings(tmp_path, pg_dsn, schemas)
    env = {"ESRA_TEST_STATE_PASSWORD": urlsplit(pg_dsn).password or "unused-by-trust-auth"}
    log = tmp_path / "serve.log"
    records_table = sql.Identifier(schemas["audit"], "records")
    with serve_process(log, "--config", str(config), env=env) as host:
        # Hold the audit table's writes (reads, and the sink's readiness ping, go on): the
        # host is stopped after its change, waiting to write the change's record.
        await kill_secret_write_at(
            host,
            pg_dsn=pg_dsn,
            config_schema=schemas["config"],
            locked=records_table,
            locked_schema=schemas["audit"],
            log=log,
            value="pw",
        )

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        counted = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE event = %s").format(records_table),
            ("esra.admin.secret.write",),
        )
        assert counted.fetchone() == (0,)  # the kill left the change without its record

    governance = {"Authorization": f"Bearer {_token('GOVERNANCE_MANAGE', subject='gov')}"}
    with serve_process(log, "--config", str(config), env=env) as host:
        async with httpx2.AsyncClient(headers=governance, timeout=60) as http:
            records = await audit_records(http, host.url)
    written = [r for r in records if r["event"] == "esra.admin.secret.write"]
    # Version 1 is the host adopting the configuration file it runs on; the write made 2.
    assert [(r["outcome"], r["dimensions"]["version"]) for r in written] == [("ok", 2)], (
        log.read_text(errors="replace")
    )
