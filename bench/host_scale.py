"""Host scale-out: one ``esra serve --config`` process against two, behind a round-robin client.

Two ``esra serve --config`` processes start from one settings file, as a deployment behind a
load balancer would run them: the demo tenant's configuration and its three SQLite databases
(``esra.starlette._demo``: the catalogue, the support desk with its ``region`` record filter,
the HR policies; each host opens the same files read-only), one PostgreSQL ``[state]``
database (configuration, secrets and the audit log, ``[audit] kind = "database"``, a call
answered only once its audit records are committed; three schemas the bench creates and
drops), and one Redis (``[redis]``: the shared source-selection cache, fetch quota and
breaker openings, under a key prefix of the run's own, deleted afterwards). Tokens are
signed by an identity provider of the bench's own whose JWKS the settings trust.

One warm-up call per host, made with the MCP SDK's ``Client``, checks that the host answers
and records the HTTP request the SDK sent for its ``tools/call``. From a separate process,
``--clients`` concurrent clients then make ``--calls`` calls in all, each call that very
request (stateless streamable HTTP: one self-contained POST, as in ``bench/host_load.py``)
sent to the next host in turn — round robin over one host's port or over both. Both hosts
run for the whole bench, so the idle host of a one-host run is there too (it polls the
state database every ``config_poll_s``). ``--rounds`` alternates one host and two (the order
swapped each round, so drift on a shared machine does not favour one side). Printed per
run: calls per second, p50 and p99 latency, and the cores the whole machine kept busy
meanwhile (``/proc/stat``: other work on the machine shows) and the hosts' own CPU time per
call (``/proc/<pid>/stat``, both hosts summed: what a call costs a host, whatever else
competes for the cores); per round and as the median, the two-host / one-host throughput
ratio. The audit records written and the Redis keys under the run's prefix are counted at
the end, so a host that wrote or shared nothing shows.

On a 2-core machine the client process, both hosts, PostgreSQL and Redis share the two
cores: one host already keeps one core busy, so two hosts cannot double throughput there;
the ratio shows how much of the second core a second process turns into calls. The load
average at the start and the end is printed.

``--workers`` compares one process against two on one machine instead (issue 19): host A is
``esra serve --workers 1``, host B ``esra serve --workers 2`` (one port, two worker processes
behind it), both running throughout; a run loads one of them, and the host CPU counts the
serving processes (B's workers, not its idle supervisor).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import multiprocessing
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from esra.core.config import dump_snapshot
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import CLIENT_APP, SLUG, TENANT, demo_snapshot

# Run as a script (``python bench/host_scale.py``, as ``nox -s bench`` does), the project
# root is not on the path; the private helpers live in the ``bench`` package.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._serve_hosts import (
    STATE_PASSWORD_ENV,
    BenchIssuer,
    ServeHost,
    redis_keys,
    serve_host,
    state_password_env,
)

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
TOOL = f"esra_{SLUG}"
PROMPT = "my e-bike battery is not charging"
STATE_KINDS = ("config", "secrets", "audit")
# The SDK client's ``tools/call`` request: its headers (minus the connection's own) and body.
RecordedCall = tuple[dict[str, str], bytes]
_HOP_HEADERS = frozenset({"host", "content-length", "connection", "authorization"})
# Latencies (seconds) and the run's duration.
Result = tuple[list[float], float]
# A run's result, the cores the whole machine kept busy meanwhile and the hosts' CPU seconds
# (None: not on Linux).
Measured = tuple[Result, float | None, float | None]


def _state_schemas(run_id: str) -> dict[str, str]:
    return {kind: f"esra_bench_scale_{run_id}_{kind}" for kind in STATE_KINDS}


def _write_settings(
    directory: Path, dsn: str, redis_url: str, *, run_id: str, issuer: BenchIssuer
) -> Path:
    """The one settings file both hosts start from."""
    databases = directory / "databases"
    databases.mkdir()
    snapshot = demo_snapshot()
    build_demo_databases(databases, snapshot)
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(snapshot)))
    (directory / "jwks.json").write_text(json.dumps(issuer.jwks()))
    keyring = directory / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    # The document-reference keys in a file, as several hosts (and --workers) need.
    refs = directory / "refs.json"
    material = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    refs.write_text(json.dumps({"current": "r1", "keys": {"r1": material}}))
    refs.chmod(0o600)
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    user, database = parts.username or "postgres", parts.path.lstrip("/")
    # The password is a reference, never in the file (trust authentication ignores it).
    state = f"postgresql://{user}:${{secret:env:{STATE_PASSWORD_ENV}}}@{host}:{port}/{database}"
    schemas = _state_schemas(run_id)
    settings = directory / "esra.toml"
    settings.write_text(
        f"""
[[issuers]]
issuer = "{issuer.issuer}"
audience = "{issuer.audience}"
jwks_file = "jwks.json"
algorithms = ["RS256"]

[[tenants]]
id = "{TENANT}"
config = "tenant.json"
databases = "databases"

[fetch]
keys_file = "refs.json"

[state]
database = "{state}"
config_schema = "{schemas["config"]}"
secrets_schema = "{schemas["secrets"]}"
audit_schema = "{schemas["audit"]}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"

[redis]
url = "{redis_url}"
key_prefix = "esra-bench-{run_id}:"
"""
    )
    return settings


async def _warm_up(url: str, token: str) -> RecordedCall:
    """One SDK call: checks the host answers, records the SDK's ``tools/call`` request."""
    sent: list[RecordedCall] = []

    async def remember(request: Any) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            kept = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
            sent.append((kept, request.content))

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            event_hooks={"request": [remember]},
            timeout=60,
        ) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool(TOOL, {"prompt": PROMPT})
    content = result.structured_content or {}
    if result.is_error or not content.get("results") or len(sent) != 1:
        msg = f"the warm-up call on {url} found nothing: {content or result.content}"
        raise RuntimeError(msg)
    return sent[0]


def _answered(message: Any) -> bool:
    result = message.get("result") or {}
    structured = result.get("structuredContent") or {}
    return not result.get("isError") and bool(structured.get("results"))


async def _round_robin(
    urls: Sequence[str], headers: dict[str, str], body: bytes, *, clients: int, calls: int
) -> Result:
    """``clients`` concurrent clients, ``calls`` calls in all, each to the next URL in turn."""
    latencies: list[float] = []
    turn = itertools.cycle(urls)
    per_client = [calls // clients + (1 if n < calls % clients else 0) for n in range(clients)]
    ready = 0
    go = asyncio.Event()

    async def call(http: httpx2.AsyncClient, url: str) -> None:
        response = await http.post(url, content=body)
        response.raise_for_status()
        if not _answered(response.json()):
            msg = f"call to {url} failed: {response.text[:500]}"
            raise RuntimeError(msg)

    async def client(count: int) -> None:
        nonlocal ready
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            for url in urls:  # one kept-alive connection to each host before the clock
                await call(http, url)
            ready += 1
            await go.wait()
            for _ in range(count):
                started = time.perf_counter()
                await call(http, next(turn))
                latencies.append(time.perf_counter() - started)

    tasks = [asyncio.create_task(client(n)) for n in per_client]
    while ready < clients:
        if any(task.done() for task in tasks):
            await asyncio.gather(*tasks)  # a client failed before the start: raise its error
        await asyncio.sleep(0.01)
    started = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    return latencies, time.perf_counter() - started


def _client_process(
    urls: Sequence[str], token: str, call: RecordedCall, *, clients: int, calls: int
) -> Result:
    """The load, from its own process: the clients do not share a host's interpreter."""
    headers = {**call[0], "authorization": f"Bearer {token}"}
    return asyncio.run(
        _round_robin([f"{url}/mcp" for url in urls], headers, call[1], clients=clients, calls=calls)
    )


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


@contextlib.contextmanager
def _state_dropped(dsn: str, run_id: str) -> Iterator[None]:
    """Drop the run's state schemas when the block ends (the hosts create them)."""
    try:
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in _state_schemas(run_id).values():
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


def _audit_records(dsn: str, run_id: str) -> int:
    schema = _state_schemas(run_id)["audit"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "records"))
        ).fetchone()
    return int(row[0]) if row else 0


def _reachable(dsn: str, redis_url: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            pass
    except psycopg.Error as exc:
        print(f"host_scale: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False
    try:
        import redis  # noqa: PLC0415

        redis.Redis.from_url(redis_url, socket_connect_timeout=5).ping()
    except Exception as exc:  # not installed or not reachable: either way, skipped
        print(f"host_scale: Redis unavailable ({type(exc).__name__}); skipped")
        return False
    return True


def _machine_busy() -> tuple[int, int] | None:
    """Busy and total CPU time of the whole machine so far, in ticks (Linux only)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(value) for value in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def _cores_busy(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1]) * (os.cpu_count() or 1)


def _process_cpu_s(pids: Sequence[int]) -> float | None:
    """The user and system CPU time the processes ``pids`` used so far (Linux only)."""
    total = 0
    try:
        for pid in pids:
            # Fields after the command's closing parenthesis; utime and stime are 14 and 15.
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def _serving_pids(host: ServeHost) -> list[int]:
    """The processes that serve ``host``'s calls: its workers if it has any, else itself."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == host.process.pid:
                    children.append(int(entry.name))
    return children or [host.process.pid]


def _measure(
    hosts: Sequence[ServeHost],
    token: str,
    *,
    clients: int,
    calls: int,
    rounds: int,
    workers: bool = False,
) -> list[dict[int, Measured]]:
    recorded = asyncio.run(_warm_up(hosts[0].url, token))
    for host in hosts[1:]:
        asyncio.run(_warm_up(host.url, token))
    results: list[dict[int, Measured]] = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        for number in range(rounds):
            order = (1, 2) if number % 2 == 0 else (2, 1)
            by_count: dict[int, Measured] = {}
            for count in order:
                # Workers: one port per run, that of the process with ``count`` workers.
                urls = [hosts[count - 1].url] if workers else [host.url for host in hosts[:count]]
                pids = [pid for host in hosts for pid in _serving_pids(host)]
                before, cpu_before = _machine_busy(), _process_cpu_s(pids)
                result = pool.submit(
                    _client_process, urls, token, recorded, clients=clients, calls=calls
                ).result()
                cpu_after = _process_cpu_s(pids)
                cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
                by_count[count] = (result, _cores_busy(before, _machine_busy()), cpu)
            results.append(by_count)
    return results


def _print_results(results: Sequence[dict[int, Measured]], unit: str = "hosts") -> list[float]:
    header = f"{'round':<6} {unit:>7} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}"
    print(f"{header} {'machine cores busy':>19} {'host CPU ms/call':>17}")
    ratios: list[float] = []
    for number, by_count in enumerate(results, start=1):
        rates = {}
        for count in (1, 2):
            (latencies, seconds), cores, cpu = by_count[count]
            rates[count] = len(latencies) / seconds
            p50, p99 = _percentile(latencies, 0.5) * 1000, _percentile(latencies, 0.99) * 1000
            busy = "?" if cores is None else f"{cores:.2f}"
            per_call = "?" if cpu is None else f"{cpu / len(latencies) * 1000:.2f}"
            row = f"{number:<6} {count:>7} {rates[count]:>8.1f} {p50:>8.2f} {p99:>8.2f}"
            print(f"{row} {busy:>19} {per_call:>17}")
        ratios.append(rates[2] / rates[1])
    return ratios


def main() -> int:
    """Start two hosts on one state database and one Redis; load one, then both, in turns."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--calls", type=int, default=400, help="calls per run, in all")
    parser.add_argument("--rounds", type=int, default=3, help="1-host/2-host pairs")
    parser.add_argument("--quick", action="store_true", help="one round of 100 calls a run")
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip() or DEFAULT_DSN,
        help="the PostgreSQL [state] database (default: $ESRA_TEST_POSTGRES_DSN or local)",
    )
    parser.add_argument("--redis", default=DEFAULT_REDIS, help=f"[redis] url ({DEFAULT_REDIS})")
    parser.add_argument(
        "--workers",
        action="store_true",
        help="compare `esra serve --workers 1` with `--workers 2` on one port each",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.rounds = 100, 1
    if not _reachable(args.dsn, args.redis):
        return 0
    run_id = uuid.uuid4().hex[:10]
    issuer = BenchIssuer()
    token = issuer.token(TENANT, subject="bench", client=CLIENT_APP, claims={"region": "emea"})
    start_load = _load_average()
    env = state_password_env(args.dsn)
    with (
        tempfile.TemporaryDirectory(prefix="esra-bench-scale-") as tmp,
        _state_dropped(args.dsn, run_id),
        redis_keys(args.redis, f"esra-bench-{run_id}:") as count_keys,
    ):
        directory = Path(tmp)
        settings = _write_settings(directory, args.dsn, args.redis, run_id=run_id, issuer=issuer)
        a_options, b_options = (
            (("--workers", "1"), ("--workers", "2")) if args.workers else ((), ())
        )
        with (
            serve_host("A", settings, directory / "a.log", env=env, options=a_options) as first,
            serve_host("B", settings, directory / "b.log", env=env, options=b_options) as second,
        ):
            try:
                results = _measure(
                    (first, second),
                    token,
                    clients=args.clients,
                    calls=args.calls,
                    rounds=max(1, args.rounds),
                    workers=args.workers,
                )
            except Exception:
                for host in (first, second):
                    print(f"--- esra serve ({host.name}) log:\n{host.log_tail()}", file=sys.stderr)
                raise
        records, keys = _audit_records(args.dsn, run_id), count_keys()
    served = (
        "one `esra serve --config --workers 1` or `--workers 2` (one port)"
        if args.workers
        else "round robin over 1 or 2 `esra serve --config` processes"
    )
    print(
        f"host_scale: {args.clients} concurrent clients, {args.calls} calls per run, "
        f"{served} (demo tenant, 3 SQLite sources); "
        f"shared PostgreSQL [state] with database audit, shared Redis; clients in a third "
        f"process; {os.cpu_count()} CPUs for all of them"
    )
    print(f"load average at start {start_load}, at end {_load_average()}")
    ratios = _print_results(results, "workers" if args.workers else "hosts")
    compared = "2 workers / 1 worker" if args.workers else "2 hosts / 1 host"
    print(
        f"{compared} throughput: {statistics.median(ratios):.2f} "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    # Every call made: the measured ones, the warm-ups, and each client's first call to each
    # host of a run (its connection opened before the clock starts).
    made = sum(
        len(result[0]) + args.clients * (1 if args.workers else count)
        for run in results
        for count, (result, _cores, _cpu) in run.items()
    )
    made += 2
    print(
        f"audit records written: {records} ({records / made:.2f} per call made); "
        f"Redis keys under the run's prefix: {keys}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
