"""Scale-out (issue 17): real ``esra serve`` and ``esra worker`` processes on one PostgreSQL
and one Redis.

The deployment: tenant ``acme`` has a PostgreSQL document store (the ``handbook`` tool, with
fetch) and a second tool that also searches a source whose mapping names a column its table
lacks, so every query on it fails after its health check passed; tenant ``beta`` has a
small PostgreSQL table under the same ``handbook`` slug. Every capability caches results
for five minutes. State (configuration, secrets, audit) is in
PostgreSQL; the cache, the fetch quota and the breakers are shared through a private
``redis-server`` the tests can stop.

- Two hosts: a caller's fetch budget spent across both is enforced exactly once; a search
  warmed on one host is a cache hit on the other for the same caller, and never for the other
  tenant, which gets its own rows; a breaker opened by the failures one host saw is open on
  the other before that host saw a single failure.
- Two workers index 500 documents uploaded through one host exactly once, while one of them
  is killed with SIGKILL and started again.
- Ctrl-C stops a worker wherever its start-up waits on the state database: on its first
  connection, on each pool's, or once it serves.
- Redis stopped mid-run: fetches are refused with ``ESRA_QUOTA_UNAVAILABLE``, searches are
  still answered (uncached), nothing hangs; Redis back: normal service, no restart.
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
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx2
import pytest
import redis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent
from psycopg import sql

from esra.core.config import (
    AccessPolicy,
    BindingMode,
    CapabilityLimits,
    ConfigSnapshot,
    SourceBinding,
    dump_snapshot,
)
from esra.postgres._store_factory import postgres_store_source
from esra.starlette._cli import EXIT_INTERRUPTED
from tests._redis import REDIS_SERVER, RedisProcess, free_port
from tests._serve_process import ServeHost, esra_argv, kill_9, serve_process
from tests._stalling_proxy import StallingProxy
from tests.core.factories import make_capability, make_exposure, make_mapping, make_source
from tests.postgres.conftest import admin, host_port
from tests.starlette._tokens import AUDIENCE, ISSUER, idp

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.redis]

ACME, BETA, SLUG, FLAKY = "acme", "beta", "handbook", "flaky"
PASSWORD_VARIABLE = "ESRA_PGSTORE_PASSWORD"
HOURLY_CHARS = 500
DOCUMENTS = 500
# Safety nets for a slow machine, never measurements.
_WAIT_S = 240.0
_PROCESS_TIMEOUT_S = 300.0

LEAVE = (
    "# Parental leave\n\n"
    + " ".join(
        f"Employees may take sixteen weeks of paid parental leave, clause {n}." for n in range(20)
    )
    + "\n"
).encode()


@attrs.frozen
class Deployment:
    settings: Path
    env: dict[str, str]
    redis: RedisProcess
    pg_dsn: str
    store_schema: str
    audit_schema: str
    redis_prefix: str


def _limits() -> CapabilityLimits:
    # Result caching on, and a breaker-friendly attempt budget (no retries to wait through).
    return attrs.evolve(CapabilityLimits(), result_cache_ttl_s=300.0, retry_attempts=1)


def _acme(store_template: str, store_schema: str, pg_template: str, schema: str) -> ConfigSnapshot:
    store, store_mapping = postgres_store_source(ACME, store_template, schema=store_schema)
    broken = make_source(
        "broken", tenant_id=ACME, provider_kind="postgres", connection_ref=pg_template
    )
    broken_mapping = make_mapping(
        "m-broken",
        source_id="broken",
        tenant_id=ACME,
        relation="broken_notes",
        schema=schema,
        text_index="doc",
    )  # its body column (col_body) does not exist: every query fails, health passes
    handbook = make_capability(
        [SourceBinding(store.id, BindingMode.MANDATORY)],
        tenant_id=ACME,
        name="The staff handbook",
        limits=_limits(),
    )
    # Its own tool, so the handbook's responses stay complete (only those are cached).
    flaky = make_capability(
        [
            SourceBinding(store.id, BindingMode.MANDATORY),
            SourceBinding("broken", BindingMode.MANDATORY),
        ],
        capability_id="cap-flaky",
        tenant_id=ACME,
        name="The handbook and a failing source",
        limits=_limits(),
    )
    exposures = (
        make_exposure(tenant_id=ACME, slug=SLUG, fetch_enabled=True),
        make_exposure(exposure_id="exp-flaky", tenant_id=ACME, slug=FLAKY, capability_id=flaky.id),
    )
    return ConfigSnapshot(
        tenant_id=ACME,
        version="v1",
        sources=(store, broken),
        mappings=(store_mapping, broken_mapping),
        capabilities=(handbook, flaky),
        exposures=exposures,
        access_policies=tuple(AccessPolicy.matching(e) for e in exposures),
    )


def _beta(pg_template: str, schema: str) -> ConfigSnapshot:
    notes = make_source(
        "notes", tenant_id=BETA, provider_kind="postgres", connection_ref=pg_template
    )
    mapping = make_mapping(
        "m-notes", source_id="notes", tenant_id=BETA, relation="beta_notes", schema=schema,
        text_index="doc",
    )  # fmt: skip
    capability = make_capability(["notes"], tenant_id=BETA, name="Beta's notes", limits=_limits())
    exposure = make_exposure(tenant_id=BETA, slug=SLUG)
    return ConfigSnapshot(
        tenant_id=BETA,
        version="v1",
        sources=(notes,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _tables(pg_dsn: str, schema: str) -> None:
    """Beta's notes, and the table the broken mapping reads a missing column of."""
    vector = "GENERATED ALWAYS AS (to_tsvector('english', col_title || ' ' || {})) STORED"
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.beta_notes (col_id text PRIMARY KEY, col_title text, col_body "
                "text, doc tsvector " + vector.format("col_body") + ")"
            ).format(sql.Identifier(schema))
        )
        conn.execute(
            sql.SQL("INSERT INTO {}.beta_notes (col_id, col_title, col_body) VALUES "
                    "('b1', 'Beta parental leave', 'Beta staff get paid parental leave weeks')"
            ).format(sql.Identifier(schema))
        )  # fmt: skip
        conn.execute(
            sql.SQL(
                "CREATE TABLE {}.broken_notes (col_id text PRIMARY KEY, col_title text, doc "
                "tsvector " + vector.format("''") + ")"
            ).format(sql.Identifier(schema))
        )


@contextlib.contextmanager
def _deployment(
    tmp_path: Path, pg_dsn: str, role: tuple[str, str], store_schema: str, pg_schema: str
) -> Iterator[Deployment]:
    host, port = host_port(pg_dsn)
    database = urlsplit(pg_dsn).path.lstrip("/")
    store_template = (
        f"postgresql://{role[0]}:${{secret:env:{PASSWORD_VARIABLE}}}@{host}:{port}/{database}"
    )
    _tables(pg_dsn, pg_schema)
    acme = _acme(store_template, store_schema, pg_dsn, pg_schema)
    (tmp_path / "acme.json").write_text(json.dumps(dump_snapshot(acme)))
    (tmp_path / "beta.json").write_text(json.dumps(dump_snapshot(_beta(pg_dsn, pg_schema))))
    (tmp_path / "jwks.json").write_text(json.dumps(idp().jwks()))
    kek = tmp_path / "kek.json"
    kek.write_text(json.dumps({"active": "k1", "keys": {"k1": _key(base64.b64encode)}}))
    kek.chmod(0o600)
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"current": "r1", "keys": {"r1": _key(base64.urlsafe_b64encode)}}))
    refs.chmod(0o600)
    suffix = uuid.uuid4().hex[:10]
    server = RedisProcess(free_port())
    server.start()
    prefix = f"esra-scale-{suffix}:"
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

[tenants.secrets]
env_names = ["{PASSWORD_VARIABLE}"]

[tenants.sources.document_store]
schema = "{store_schema}"
pool_size = 2

[tenants.sources.broken]
pool_size = 1

[[tenants]]
id = "{BETA}"
config = "beta.json"
outbound_hosts = ["{host}:{port}"]

[tenants.sources.notes]
pool_size = 1

[fetch]
hourly_chars = {HOURLY_CHARS}
keys_file = "refs.json"

[state]
database = "{pg_dsn}"
config_schema = "esra_t_scfg_{suffix}"
secrets_schema = "esra_t_ssec_{suffix}"
audit_schema = "esra_t_saud_{suffix}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"

[redis]
url = "{server.url}"
key_prefix = "{prefix}"
"""
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1", PASSWORD_VARIABLE: role[1]}
    try:
        yield Deployment(
            settings, env, server, pg_dsn, store_schema, f"esra_t_saud_{suffix}", prefix
        )
    finally:
        server.kill()
        with admin(pg_dsn) as conn:
            for kind in ("scfg", "ssec", "saud"):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                        sql.Identifier(f"esra_t_{kind}_{suffix}")
                    )
                )


def _key(encode: Any) -> str:
    return str(encode(secrets.token_bytes(32)).decode())


def _token(tenant: str, **claims: Any) -> str:
    now = int(time.time())  # the hosts run on the system clock
    return idp().token(esra_tenant=tenant, iat=now, nbf=now, exp=now + 900, **claims)


@contextlib.asynccontextmanager
async def _mcp(host: ServeHost, tenant: str, subject: str) -> AsyncIterator[Client]:
    bearer = _token(tenant, sub=subject, document_scopes=["general"])
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60) as http,
        Client(streamable_http_client(f"{host.url}/mcp", http_client=http)) as client,
    ):
        yield client


async def _search(
    host: ServeHost, tenant: str, prompt: str, *, subject: str = "alice", slug: str = SLUG
) -> Any:
    async with _mcp(host, tenant, subject) as client:
        result = await client.call_tool(f"esra_{slug}", {"prompt": prompt})
    assert not result.is_error, result.content
    return result.structured_content


async def _fetch(host: ServeHost, ref: str, max_chars: int) -> tuple[bool, str, int]:
    """Whether the fetch was served, its text content, and the characters it was charged:
    the page's text, title and fields (names and values), as the quota counts them."""
    async with _mcp(host, ACME, "alice") as client:
        result = await client.call_tool(
            f"esra_{SLUG}_fetch", {"documentRef": ref, "maxChars": max_chars}
        )
    text = " ".join(part.text for part in result.content if isinstance(part, TextContent))
    page = result.structured_content or {}
    fields: dict[str, str] = page.get("fields") or {}
    charged = len(page.get("text", "")) + len(page.get("title", ""))
    charged += sum(len(name) + len(value) for name, value in fields.items())
    return (not result.is_error, text, charged)


def _manager(host: ServeHost) -> httpx2.AsyncClient:
    bearer = _token(ACME, sub="ops", esra_roles="ESRA_DATA_MANAGE")
    return httpx2.AsyncClient(
        base_url=f"{host.url}/admin/v1", headers={"Authorization": f"Bearer {bearer}"}, timeout=120
    )


async def _initialise_store(host: ServeHost) -> None:
    async with _manager(host) as manager:
        await manager.post("/store/enable")
        await manager.post("/store/initialise")
        deadline = time.monotonic() + _WAIT_S
        # Initialisation runs in the background: right after the 202 the store may still
        # read Enabled, before the job has marked it Initializing.
        while (await manager.get("/store")).json()["status"] in {"enabled", "initializing"}:
            assert time.monotonic() < deadline, "initialisation never finished"
            await asyncio.sleep(0.2)
        assert (await manager.get("/store")).json()["status"] == "ready"


async def _upload(host: ServeHost, files: list[tuple[str, bytes]]) -> None:
    async with _manager(host) as manager:
        for start in range(0, len(files), 100):  # an upload carries at most 100 files
            batch = [("files", (name, data, None)) for name, data in files[start : start + 100]]
            answer = await manager.post("/store/documents", files=batch)
            assert answer.status_code == 202, answer.text
            assert answer.json()["stored"] == len(batch), answer.json()


def _run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        esra_argv(*argv), capture_output=True, text=True, env=env,
        timeout=_PROCESS_TIMEOUT_S, check=False,
    )  # fmt: skip


def _records(deployment: Deployment, correlation_id: str) -> list[dict[str, Any]]:
    """The audit records of one invocation, read back as ``esra audit`` reads them."""
    tenants = {ACME, BETA}
    found: list[dict[str, Any]] = []
    for tenant in tenants:
        answer = _run(
            "audit", "--postgres", deployment.pg_dsn, "--schema", deployment.audit_schema,
            "--tenant", tenant, "--correlation-id", correlation_id, "--all",
            env=deployment.env,
        )  # fmt: skip
        assert answer.returncode == 0, answer.stderr
        found.extend(json.loads(line) for line in answer.stdout.splitlines())
    return found


def _retrieve_record(deployment: Deployment, correlation_id: str) -> dict[str, Any]:
    (record,) = [r for r in _records(deployment, correlation_id) if r["event"] == "esra.retrieve"]
    return record


def _breaker_open_in_redis(deployment: Deployment) -> bool:
    # The key's name is a digest of the ids; the opening it holds names them.
    with redis.Redis(port=deployment.redis.port, socket_timeout=2) as client:
        keys = list(client.scan_iter(match=f"{deployment.redis_prefix}breaker:*"))
        openings = [json.loads(value) for value in client.mget(keys) if value] if keys else []
        return any((o["tenant"], o["source"]) == (ACME, "broken") for o in openings)


@contextlib.contextmanager
def _two_hosts(deployment: Deployment, tmp_path: Path) -> Iterator[tuple[ServeHost, ServeHost]]:
    # One after the other: the first applies the state schemas, the second finds them.
    with (
        serve_process(
            tmp_path / "serve-1.log", "--config", str(deployment.settings), env=deployment.env
        ) as first,
        serve_process(
            tmp_path / "serve-2.log", "--config", str(deployment.settings), env=deployment.env
        ) as second,
    ):
        yield first, second


@pytest.fixture
def deployment(
    tmp_path: Path, pg_dsn: str, store_role: tuple[str, str], store_schema: str, pg_schema: str
) -> Iterator[Deployment]:
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.fail(f"{REDIS_SERVER} is not installed")
    with _deployment(tmp_path, pg_dsn, store_role, store_schema, pg_schema) as built:
        yield built


async def test_a_store_enabled_on_one_host_is_initialised_on_the_other(
    deployment: Deployment, tmp_path: Path
) -> None:
    """The store's lifecycle is shared through the state database: an operator's enable on
    one host and initialise on the other (as a load balancer may route them) both take,
    the first host learns Ready without serving the initialisation, and an Enabled store
    is still Enabled after a ``kill -9``. Before, each host kept its own state: the second
    refused to initialise a store "disabled", and a restart forgot the enable."""
    with _two_hosts(deployment, tmp_path) as (first, second):
        async with _manager(first) as on_first, _manager(second) as on_second:
            assert (await on_first.get("/store")).json()["status"] == "disabled"
            assert (await on_first.post("/store/enable")).status_code == 200
            assert (await on_second.get("/store")).json()["status"] == "enabled"
            kill_9(second)
        with serve_process(
            tmp_path / "serve-3.log", "--config", str(deployment.settings), env=deployment.env
        ) as restarted:
            async with _manager(restarted) as on_restarted, _manager(first) as on_first:
                assert (await on_restarted.get("/store")).json()["status"] == "enabled"
                started = await on_restarted.post("/store/initialise")
                assert started.status_code == 202, started.text
                deadline = time.monotonic() + _WAIT_S
                while (await on_first.get("/store")).json()["status"] != "ready":
                    assert time.monotonic() < deadline, (await on_first.get("/store")).json()
                    await asyncio.sleep(0.2)
                assert (await on_restarted.get("/store")).json()["status"] == "ready"
                # Ready on the first host means taking uploads there.
                await _upload(first, [("parental-leave.md", LEAVE)])


async def test_two_hosts_share_the_quota_the_cache_and_the_breakers(
    deployment: Deployment, tmp_path: Path
) -> None:
    with _two_hosts(deployment, tmp_path) as (first, second):
        await _initialise_store(first)
        await _upload(first, [("parental-leave.md", LEAVE)])
        worker = _run("worker", "--config", str(deployment.settings), "--once", env=deployment.env)
        assert worker.returncode == 0, worker.stderr

        # The cache: warmed on the first host, a hit on the second for the same caller...
        warm = await _search(first, ACME, "paid parental leave weeks")
        assert "parental-leave.md" in {r["title"] for r in warm["results"]}, warm
        assert warm["status"] == "complete", warm
        assert "cache" not in _retrieve_record(deployment, warm["correlationId"])["dimensions"]
        served = await _search(second, ACME, "paid parental leave weeks")
        assert _retrieve_record(deployment, served["correlationId"])["dimensions"]["cache"] == "hit"
        assert [r["title"] for r in served["results"]] == [r["title"] for r in warm["results"]]
        # ... and never for another tenant asking the same under the same slug.
        beta = await _search(second, BETA, "paid parental leave weeks")
        assert {r["title"] for r in beta["results"]} == {"Beta parental leave"}, beta
        assert "cache" not in _retrieve_record(deployment, beta["correlationId"])["dimensions"]

        # The quota: 300 characters of text (with the title and fields, charged with every
        # page) on one host, then as many on the other exceed 500; exactly what is left fits.
        ref = next(r["documentRef"] for r in warm["results"] if r["documentRef"])
        served, _, spent = await _fetch(first, ref, 300)
        assert served
        carried = spent - 300  # the title and fields
        served, text, _ = await _fetch(second, ref, 300)
        assert not served
        assert "ESRA_FETCH_QUOTA_EXCEEDED" in text
        left = HOURLY_CHARS - spent
        served, _, charged = await _fetch(second, ref, left - carried)
        assert served
        assert charged == left
        assert "ESRA_FETCH_QUOTA_EXCEEDED" in (await _fetch(first, ref, 1))[1]

        # The breakers: failures seen by the first host only; the second is open at once.
        for number in range(10):
            if _breaker_open_in_redis(deployment):
                break
            await _search(first, ACME, f"leave policy question {number}", slug=FLAKY)
        assert _breaker_open_in_redis(deployment), "the first host's breaker never opened"
        await asyncio.sleep(0.5)  # the announcement's delivery
        after = await _search(second, ACME, "a question the second host never saw", slug=FLAKY)
        failures = [
            r["reason"]
            for r in _records(deployment, after["correlationId"])
            if r["event"] == "esra.query.failed"
        ]
        assert failures, after
        assert set(failures) == {"CIRCUIT_OPEN"}, failures
    for log in ("serve-1.log", "serve-2.log"):
        assert "Traceback" not in (tmp_path / log).read_text(errors="replace")


def _worker(deployment: Deployment, name: str, log: Path) -> subprocess.Popen[bytes]:
    argv = esra_argv(
        "worker", "--config", str(deployment.settings), "--worker-id", name,
        "--lease", "3", "--heartbeat", "1", "--interval", "0.2",
    )  # fmt: skip
    with log.open("ab") as sink:
        return subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=deployment.env)  # noqa: S603


def _states(deployment: Deployment) -> list[tuple[str, int, int, int]]:
    """Each document's state, attempts, recorded segment count and actual segment rows."""
    documents = sql.Identifier(deployment.store_schema, "documents")
    segments = sql.Identifier(deployment.store_schema, "segments")
    with admin(deployment.pg_dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT d.state, d.attempts, d.segment_count, "
                "(SELECT count(*) FROM {s} s WHERE s.document_id = d.id) "
                "FROM {d} d WHERE d.tenant_id = %s"
            ).format(d=documents, s=segments),
            (ACME,),
        ).fetchall()
    return [(str(r[0]), _count(r[1]), _count(r[2]), _count(r[3])) for r in rows]


def _count(value: object) -> int:
    assert isinstance(value, int)
    return value


async def test_two_workers_index_500_documents_exactly_once_through_a_kill(
    deployment: Deployment, tmp_path: Path
) -> None:
    files = [
        (f"memo-{n:03}.md", f"# Memo {n}\n\nThe workshop keeps {n} quokka chain tools.\n".encode())
        for n in range(DOCUMENTS)
    ]
    with serve_process(
        tmp_path / "serve.log", "--config", str(deployment.settings), env=deployment.env
    ) as host:
        await _initialise_store(host)
        await _upload(host, files)
    workers = {
        name: _worker(deployment, name, tmp_path / f"{name}.log") for name in ("w-one", "w-two")
    }
    try:
        deadline = time.monotonic() + _WAIT_S
        while sum(state == "indexed" for state, *_ in _states(deployment)) < DOCUMENTS // 5:
            assert time.monotonic() < deadline, "the workers indexed nothing"
            await asyncio.sleep(0.1)
        workers["w-one"].send_signal(signal.SIGKILL)
        assert workers["w-one"].wait(timeout=60) == -signal.SIGKILL
        workers["w-one"] = _worker(deployment, "w-one", tmp_path / "w-one.log")
        while sum(state == "indexed" for state, *_ in _states(deployment)) < DOCUMENTS:
            assert time.monotonic() < deadline, _states(deployment)
            await asyncio.sleep(0.2)
    finally:
        for process in workers.values():
            process.send_signal(signal.SIGINT)
        for process in workers.values():
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    states = _states(deployment)
    assert len(states) == DOCUMENTS
    assert {state for state, *_ in states} == {"indexed"}
    # Exactly once: each document's segments are the one set its indexing recorded, and only
    # the documents the killed worker held were claimed a second time.
    assert all(recorded == actual > 0 for _, _, recorded, actual in states)
    assert all(attempts in {1, 2} for _, attempts, _, _ in states)
    assert sum(attempts == 2 for _, attempts, _, _ in states) < DOCUMENTS // 10


def _through(dsn: str, port: int) -> str:
    """``dsn`` with its host and port replaced by 127.0.0.1:``port`` (a proxy's)."""
    parts = urlsplit(dsn)
    user = f"{parts.username}@" if parts.username else ""
    return parts._replace(netloc=f"{user}127.0.0.1:{port}").geturl()


def test_ctrl_c_stops_a_worker_wherever_its_start_waits_on_the_state_database(
    deployment: Deployment, tmp_path: Path
) -> None:
    """SIGINT while ``esra worker`` waits on its n-th connection to the state database, for
    every n its start-up reaches, then once it serves: it always exits, 130 while starting
    (no traceback), 0 once serving. A pool interrupted while it connected was left running;
    asyncio.run's shutdown then cancelled its connect, which the pool took for a failed
    attempt, and the process never exited (a worker that outlived its SIGINT)."""
    written = deployment.settings.read_text()
    assert f'database = "{deployment.pg_dsn}"' in written
    upstream = host_port(deployment.pg_dsn)
    interrupted = 0
    while True:
        with StallingProxy(upstream, forward=interrupted) as proxy:
            proxied = _through(deployment.pg_dsn, proxy.port)
            deployment.settings.write_text(
                written.replace(f'database = "{deployment.pg_dsn}"', f'database = "{proxied}"')
            )
            log = tmp_path / f"worker-{interrupted}.log"
            process = _worker(deployment, "w-interrupted", log)
            try:
                deadline = time.monotonic() + _WAIT_S
                while not proxy.stalled.is_set() and "serving" not in log.read_text():
                    assert process.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.05)
                stalled = proxy.stalled.is_set()
                process.send_signal(signal.SIGINT)
                status = process.wait(timeout=_PROCESS_TIMEOUT_S)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        output = log.read_text(errors="replace")
        assert "Traceback" not in output, output
        if not stalled:
            assert status == 0, output
            break
        assert status == EXIT_INTERRUPTED, output
        interrupted += 1
    # The first connection checks the schemas; the pools (configuration, secrets, audit)
    # follow it, and each is one of the places interrupted above.
    assert interrupted >= 2


async def test_redis_stopped_mid_run_refuses_fetches_and_still_answers_searches(
    deployment: Deployment, tmp_path: Path
) -> None:
    with serve_process(
        tmp_path / "serve.log", "--config", str(deployment.settings), env=deployment.env
    ) as host:
        await _initialise_store(host)
        await _upload(host, [("parental-leave.md", LEAVE)])
        worker = _run("worker", "--config", str(deployment.settings), "--once", env=deployment.env)
        assert worker.returncode == 0, worker.stderr
        found = await _search(host, ACME, "paid parental leave weeks")
        ref = next(r["documentRef"] for r in found["results"] if r["documentRef"])
        assert (await _fetch(host, ref, 50))[0]

        deployment.redis.kill()
        async with asyncio.timeout(60):  # nothing may hang; this bound only fails the test
            served, text, _ = await _fetch(host, ref, 50)
            assert not served
            assert "ESRA_QUOTA_UNAVAILABLE" in text
            uncached = await _search(host, ACME, "paid parental leave weeks")
            assert "parental-leave.md" in {r["title"] for r in uncached["results"]}
            assert (
                "cache" not in _retrieve_record(deployment, uncached["correlationId"])["dimensions"]
            )

        deployment.redis.start()  # the same port: the host reconnects by itself
        async with asyncio.timeout(60):
            while not (await _fetch(host, ref, 50))[0]:
                await asyncio.sleep(0.5)
    assert "Traceback" not in (tmp_path / "serve.log").read_text(errors="replace")
