"""A real ``esra serve`` on PostgreSQL killed with SIGKILL in the middle of a secret write.

Both durability tests of an administrative change stop the host at a chosen write: the table
that write goes to is locked (reads go on), the secret write is sent, and once the workspace
records it the host — now waiting on that table — is killed. The killed host's blocked
INSERT is then ended too, as if the kill had landed before the statement was sent (the
server would otherwise run it once the lock goes: it notices a vanished client only when it
answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx2
import psycopg
from psycopg import sql

from esra.postgres._config_store import PostgresConfigStore
from tests._serve_process import ServeHost, kill_9
from tests.postgres.test_durable_state_postgres import TENANT, _token

__all__ = ["history", "kill_secret_write_at"]


async def history(pg_dsn: str, schema: str) -> list[str]:
    """The actions the tenant's workspace history records, oldest first."""
    store = await PostgresConfigStore.open(pg_dsn, schema=schema, apply_schema=False)
    try:
        return [change.action for change in await store.history(TENANT)]
    finally:
        await store.close()


async def kill_secret_write_at(
    host: ServeHost,
    *,
    pg_dsn: str,
    config_schema: str,
    locked: sql.Identifier,
    locked_schema: str,
    log: Path,
    value: str,
) -> None:
    """Write the secret ``claims-pw`` through ``host`` and kill it while the write waits on
    ``locked`` (a table in ``locked_schema``), after the workspace has recorded it."""
    security = {"Authorization": f"Bearer {_token('SECURITY_MANAGE', subject='sec')}"}
    holder = psycopg.connect(pg_dsn)
    try:
        holder.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(locked))
        async with httpx2.AsyncClient(headers=security, timeout=60) as http:
            write = asyncio.create_task(
                http.put(f"{host.url}/admin/v1/secrets/claims-pw", json={"value": value})
            )
            deadline = time.monotonic() + 60
            while "esra.admin.secret.write" not in await history(pg_dsn, config_schema):
                assert time.monotonic() < deadline, log.read_text(errors="replace")
                assert not write.done(), write.result().text
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)
            assert not write.done()  # the host waits on the locked table
            kill_9(host)
            with psycopg.connect(pg_dsn, autocommit=True) as killer:
                killer.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND query ILIKE %s",
                    (f"%{locked_schema}%",),
                )
            write.cancel()
            with contextlib.suppress(BaseException):
                await write
    finally:
        holder.rollback()
        holder.close()
