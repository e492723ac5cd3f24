"""``esra serve --config --workers 2`` (issue 19): real processes on PostgreSQL and Redis.

The deployment is the scale-out one reduced to what a worker must share: state
(configuration, secrets, audit) in PostgreSQL, the cache, quota and breakers in a private
``redis-server``, the document-reference keys in a file; tenant ``acme`` searches one
PostgreSQL table.

Which worker answered is read from outside, as an operator would: the established
connections to the port that each worker process holds (``/proc``). Nothing in a response
says which process served it.

- Two workers serve MCP calls from one port, and both answer.
- A worker killed with SIGKILL is started again; the service answers meanwhile and after.
- SIGTERM to the parent stops every worker and exits 0.
- SIGTERM while the workers are still starting stops them too.
- Workers dying faster than N per 60 s stop the service, exit 1, saying why.
- A worker that cannot start makes the parent exit non-zero at once.
- A parent killed with SIGKILL leaves no worker serving.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from esra.core.config import AccessPolicy, ConfigSnapshot, dump_snapshot
from tests._redis import REDIS_SERVER, RedisProcess, free_port
from tests._serve_process import ServeHost, esra_argv, serve_process
from tests.core.factories import make_capability, make_exposure, make_mapping, make_source
from tests.postgres.conftest import admin, host_port
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.redis]

ACME, SLUG = "acme", "notes"
WORKERS = 2
_WAIT_S = 30.0  # every wait below; a bound that only fails the test
_ESTABLISHED = "01"  # the TCP state in /proc/net/tcp


@attrs.frozen
class Deployment:
    settings: Path
    env: dict[str, str]


def _snapshot(pg_dsn: str, schema: str) -> ConfigSnapshot:
    notes = make_source("notes", tenant_id=ACME, provider_kind="postgres", connection_ref=pg_dsn)
    mapping = make_mapping(
        "m-notes", source_id="notes", tenant_id=ACME, relation="notes", schema=schema,
        text_index="doc",
    )  # fmt: skip
    capability = make_capability(["notes"], tenant_id=ACME, name="Acme's notes")
    exposure = make_exposure(tenant_id=ACME, slug=SLUG)
    return ConfigSnapshot(
        tenant_id=ACME,
        version="v1",
        sources=(notes,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _table(pg_dsn: str, schema: str) -> None:
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.notes (col_id text PRIMARY KEY, col_title text, col_body text, "
                "doc tsvector GENERATED ALWAYS AS (to_tsvector('english', col_title || ' ' || "
                "col_body)) STORED)"
            ).format(sql.Identifier(schema))
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.notes (col_id, col_title, col_body) VALUES ('n1', 'Parental "
                "leave', 'Staff get sixteen weeks of paid parental leave')"
            ).format(sql.Identifier(schema))
        )


def _key(encode: Callable[[bytes], bytes]) -> str:
    return encode(secrets.token_bytes(32)).decode()


def _settings(tmp_path: Path, pg_dsn: str, redis_url: str, suffix: str, *, state: str) -> Path:
    host, port = host_port(pg_dsn)
    kek = tmp_path / "kek.json"
    kek.write_text(json.dumps({"active": "k1", "keys": {"k1": _key(base64.b64encode)}}))
    kek.chmod(0o600)
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"current": "r1", "keys": {"r1": _key(base64.urlsafe_b64encode)}}))
    refs.chmod(0o600)
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
id = "{ACME}"
config = "acme.json"
outbound_hosts = ["{host}:{port}"]

[tenants.sources.notes]
pool_size = 1

[fetch]
keys_file = "refs.json"

[state]
database = "{state}"
config_schema = "esra_t_wcfg_{suffix}"
secrets_schema = "esra_t_wsec_{suffix}"
audit_schema = "esra_t_waud_{suffix}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"

[redis]
url = "{redis_url}"
key_prefix = "esra-workers-{suffix}:"
"""
    )
    return settings


@pytest.fixture
def redis_server() -> Iterator[RedisProcess]:
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.fail(f"{REDIS_SERVER} is not installed")
    server = RedisProcess(free_port())
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def deployment(
    tmp_path: Path, pg_dsn: str, pg_schema: str, redis_server: RedisProcess
) -> Iterator[Deployment]:
    _table(pg_dsn, pg_schema)
    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(_snapshot(pg_dsn, pg_schema))))
    suffix = uuid.uuid4().hex[:10]
    settings = _settings(tmp_path, pg_dsn, redis_server.url, suffix, state=pg_dsn)
    try:
        yield Deployment(settings, {**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        with admin(pg_dsn) as conn:
            for kind in ("wcfg", "wsec", "waud"):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                        sql.Identifier(f"esra_t_{kind}_{suffix}")
                    )
                )


# What an operator sees from outside: the workers, and the connections each one holds.


def _children(parent: int) -> set[int]:
    """The live processes whose parent is ``parent``."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found.add(int(entry.name))
    return found


def _established_inodes(port: int) -> set[str]:
    """The socket inodes of the established connections whose local port is ``port``."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rpartition(":")[2], 16)
                if local_port == port and fields[3] == _ESTABLISHED:
                    inodes.add(fields[9])
    return inodes


def _holding_connections(pids: set[int], port: int) -> set[int]:
    """Which of ``pids`` hold at least one established connection to ``port``."""
    inodes = _established_inodes(port)
    holding: set[int] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        holding.add(pid)
                        break
    return holding


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (an orphan's zombie, not reaped yet, counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return True
    return state in {"Z", "X"}


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _log_has(log: Path, text: str) -> Callable[[], bool]:
    return lambda: text in log.read_text(errors="replace")


# The caller's side.


def _token() -> str:
    now = int(time.time())  # the workers run on the system clock
    return idp().token(esra_tenant=ACME, sub="alice", iat=now, nbf=now, exp=now + 900)


@contextlib.asynccontextmanager
async def _session(host: ServeHost) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {_token()}"}, timeout=30) as http,
        Client(streamable_http_client(f"{host.url}/mcp", http_client=http)) as client,
    ):
        yield client


async def _search(client: Client) -> None:
    result = await client.call_tool(f"esra_{SLUG}", {"prompt": "paid parental leave weeks"})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    titles = {r["title"] for r in result.structured_content["results"]}
    assert titles == {"Parental leave"}, result.structured_content


async def _answering(host: ServeHost, workers: set[int], sessions: int = 4) -> set[int]:
    """Searches over ``sessions`` concurrent sessions; the workers holding their
    connections while they are still open."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(_session(host)) for _ in range(sessions)]
        await asyncio.gather(*(_search(client) for client in clients))
        return _holding_connections(workers, host.port)


async def _until_answered_by(host: ServeHost, wanted: set[int]) -> None:
    answered: set[int] = set()
    deadline = time.monotonic() + _WAIT_S
    while not wanted <= answered:
        assert time.monotonic() < deadline, f"only {answered} of {wanted} answered"
        answered |= await _answering(host, wanted)


@contextlib.contextmanager
def _workers(deployment: Deployment, log: Path) -> Iterator[ServeHost]:
    with serve_process(
        log,
        "--config",
        str(deployment.settings),
        "--workers",
        str(WORKERS),
        env=deployment.env,
        stop="interrupt",
    ) as host:
        _wait_for(_log_has(log, f"({WORKERS} workers, pids"), "the workers never all started")
        yield host


async def test_two_workers_on_one_port_both_answer_mcp_calls(
    deployment: Deployment, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with _workers(deployment, log) as host:
        workers = _children(host.process.pid)
        assert len(workers) == WORKERS, workers
        await _until_answered_by(host, workers)
    text = log.read_text(errors="replace")
    assert text.count("ESRA MCP endpoint:") == 1, text
    assert f"ESRA MCP endpoint: {host.url}/mcp ({WORKERS} workers" in text
    assert "Traceback" not in text


async def test_a_killed_worker_is_started_again_and_the_service_keeps_answering(
    deployment: Deployment, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with _workers(deployment, log) as host:
        workers = _children(host.process.pid)
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        # The survivor answers while the replacement starts.
        async with _session(host) as client:
            await _search(client)
        _wait_for(_log_has(log, f"(pid {victim}) was killed by SIGKILL; starting it again"),
                  "the supervisor never noticed the kill")  # fmt: skip
        _wait_for(_log_has(log, "accepts again"), "the replacement never started")
        now = _children(host.process.pid)
        assert len(now) == WORKERS, now
        assert victim not in now
        await _until_answered_by(host, now)  # the replacement answers too
    assert "Traceback" not in log.read_text(errors="replace")


def test_sigterm_to_the_parent_stops_every_worker_and_exits_0(
    deployment: Deployment, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with _workers(deployment, log) as host:
        workers = _children(host.process.pid)
        assert len(workers) == WORKERS
        host.process.send_signal(signal.SIGTERM)
        assert host.process.wait(timeout=_WAIT_S) == 0
        for pid in workers:
            with pytest.raises(ProcessLookupError):  # reaped by the parent, not orphaned
                os.kill(pid, 0)
    text = log.read_text(errors="replace")
    assert "while stopping" not in text, text
    assert "Traceback" not in text


def test_sigterm_while_the_workers_start_stops_them(deployment: Deployment, tmp_path: Path) -> None:
    port = free_port()
    argv = esra_argv("serve", "--config", str(deployment.settings), "--workers", "2")
    with (tmp_path / "serve.log").open("ab") as sink:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [*argv, "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT,
            env=deployment.env,
        )  # fmt: skip
    try:
        _wait_for(lambda: len(_children(process.pid)) == WORKERS, "no workers were started")
        workers = _children(process.pid)
        process.send_signal(signal.SIGTERM)  # they are composing their parts, not listening
        assert process.wait(timeout=_WAIT_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert all(_gone(pid) for pid in workers)
    assert "ESRA MCP endpoint" not in (tmp_path / "serve.log").read_text(errors="replace")


def _replaced(host: ServeHost, known: set[int]) -> Callable[[], bool]:
    """Whether a worker not in ``known`` runs, or the parent has exited."""
    return lambda: host.process.poll() is not None or bool(_children(host.process.pid) - known)


def test_workers_dying_too_often_stop_the_service(deployment: Deployment, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with _workers(deployment, log) as host:
        killed: set[int] = set()
        seen = _children(host.process.pid)
        # N restarts are allowed per 60 s; the N + 1st death stops everything.
        for _ in range(WORKERS + 1):
            alive = _children(host.process.pid) - killed
            seen |= alive
            victim = min(alive)
            os.kill(victim, signal.SIGKILL)
            killed.add(victim)
            _wait_for(_replaced(host, alive | killed), "no worker was started again")
        assert host.process.wait(timeout=_WAIT_S) == 1
        for pid in seen:
            with pytest.raises(ProcessLookupError):  # every worker stopped and reaped
                os.kill(pid, 0)
    text = log.read_text(errors="replace")
    assert f"more than {WORKERS} workers died within 60 s, so all are stopped" in text, text


def test_a_worker_that_cannot_start_fails_the_parent(
    tmp_path: Path, pg_dsn: str, redis_server: RedisProcess
) -> None:
    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(_snapshot(pg_dsn, "public"))))
    # The settings are well formed, so the parent accepts them; composing the state database
    # in each worker finds its password reference unset.
    parts = urlsplit(pg_dsn)
    server = parts.netloc.rpartition("@")[2]
    unresolved = f"postgresql://esra:${{secret:env:ESRA_T_UNSET}}@{server}{parts.path}"
    settings = _settings(tmp_path, pg_dsn, redis_server.url, "unused", state=unresolved)
    env = {k: v for k, v in os.environ.items() if k != "ESRA_T_UNSET"}
    done = subprocess.run(  # noqa: S603 - our own interpreter and module
        esra_argv("serve", "--config", str(settings), "--workers", "2", "--port", str(free_port())),
        capture_output=True, text=True, env=env, timeout=_WAIT_S * 2, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "while starting; stopping the others" in done.stderr, done.stderr
    assert "ESRA MCP endpoint" not in done.stderr


def test_workers_whose_parent_is_killed_stop_by_themselves(
    deployment: Deployment, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    with _workers(deployment, log) as host:
        workers = _children(host.process.pid)
        host.process.send_signal(signal.SIGKILL)
        assert host.process.wait(timeout=_WAIT_S) == -signal.SIGKILL
        _wait_for(lambda: all(_gone(pid) for pid in workers), "a worker outlived its parent")
    assert "Traceback" not in log.read_text(errors="replace")
