"""Host load: concurrent MCP clients against ``esra serve``'s embedded default vs. a bare route.

The embedded default (``open_embedded``: the demo tenant's SQLite sources, the empty document
store, ``LocalModel``) is served by uvicorn on 127.0.0.1 through ``HostServer``, exactly as
``esra serve`` does; a development token (``esra dev-token``) authenticates. One warm-up call,
made with the MCP SDK's ``Client``, records the statements that invocation sent to SQLite
(built by each provider's own ``StatementBuilder``) and the HTTP request the SDK sent for the
``tools/call``; the recording is switched off again before anything is measured. Side by
side, a bare Starlette app with one route, served by uvicorn on another loopback port, runs
those very statements (the same number, the same SQL and parameters) on read-only
connections (in a worker thread) and returns the rows as JSON.

``--clients`` concurrent clients make ``--calls`` calls in all, from a second process. Both
sides use identical clients: one ``httpx`` POST per call on a kept-alive connection, the
response's JSON parsed and checked. For ESRA the POST is the SDK's own recorded ``tools/call``
request (same headers, same body: stateless streamable HTTP makes each call one
self-contained request), so the server does exactly the work an SDK client causes, while the
client spends no more per call than the bare route's. ``--sdk-client`` loads ESRA through the
SDK ``Client`` instead (its per-call validation then runs on the same cores as the servers).
``--rounds`` alternates bare and ESRA runs and reports each, so drift on a shared machine
shows. Printed: p50, p99 and calls per second of both, the serving process's CPU per call
(user + system time from ``/proc/self/stat`` before and after each run, divided by its calls:
both servers live in this process, idle but for the side being loaded, while the clients run
in another), and ESRA's throughput as a share of the bare route's (target ≥ 0.6). The CPU
per call is the steadier figure on a shared machine: other work slows the calls down but
hardly changes what each costs.

``--audit`` picks the host's audit sink: ``state`` (the default: the embedded host's own,
SQLite in its ``state.db`` with ``wait_for_write``, what ``esra serve`` does with no
settings), ``logging`` (``LoggingAuditSink``, in memory: the host before it kept state), or a
durable one through ``BatchingAuditSink`` with ``wait_for_write`` as the host uses it —
``sqlite`` (a file in the bench's data directory), ``jsonl`` (a file there), ``postgres`` (a
fresh schema on ``--audit-dsn`` or ``$ESRA_TEST_POSTGRES_DSN``, dropped afterwards). Run
twice and compare the ESRA calls/s to price the durable sink (target: PostgreSQL within 5 %
of logging); the number of records
written is printed, so a sink that silently wrote nothing cannot pass for a fast one.

``--tracing`` installs the OpenTelemetry SDK in the serving process before anything is
served — every span sampled, through a ``BatchSpanProcessor`` into an exporter that drops
what it is handed, and a ``MeterProvider`` with an in-memory reader — so every call pays for
recording its spans and metrics as a production host would, minus the network. Run with and
without it and compare the ESRA/bare ratios to price tracing (target: within 5 %).

Both servers run on the loop ``esra serve`` runs on (``esra.starlette._event_loop``): uvloop's
when the ``speedups`` extra is installed (``nox -s bench`` installs it), with uvicorn then
parsing HTTP with httptools; the header line names the stack measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import io
import json
import multiprocessing
import os
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import anyio.to_thread
import attrs
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from esra.core._audit.batching import AuditBackend, BatchingAuditSink
from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core.ports import AuditSink
from esra.sqlite import SqliteFts5Provider, open_readonly
from esra.starlette._cli import main as cli_main
from esra.starlette._event_loop import run_serving, serving_loop_factory
from esra.starlette._host import HostParts
from esra.starlette._parts import open_embedded
from esra.starlette._serve import HostServer, free_port

TENANT = "larkspur"
TOOL = "esra_larkspur"
PROMPT = "my e-bike battery is not charging"
Statement = tuple[str, str, dict[str, Any]]
RECORDED: list[Statement] = []
_DATABASES: dict[int, str] = {}
# Latencies, wall seconds and the serving process's CPU seconds (user + system) over the run.
Result = tuple[list[float], float, float]
# The SDK client's ``tools/call`` request: its headers (minus the connection's own) and body.
RecordedCall = tuple[dict[str, str], bytes]
_HOP_HEADERS = frozenset({"host", "content-length", "connection", "authorization"})


def _record_statements() -> Callable[[], None]:
    """Wrap ``SqliteFts5Provider`` so each execution's built statement is remembered.

    Returns the function that unwraps it again: the wrapper builds every statement a second
    time, which must not be charged to ESRA while it is measured.
    """
    original_init = SqliteFts5Provider.__init__
    original_execute = SqliteFts5Provider.execute

    def init(self: SqliteFts5Provider, database: Any, **kwargs: Any) -> None:
        original_init(self, database, **kwargs)
        _DATABASES[id(self)] = str(database)

    async def execute(
        self: SqliteFts5Provider, query: ValidatedQuery, *, timeout_s: float
    ) -> Sequence[ResultRow]:
        built = self.builder.build(query)
        RECORDED.append((_DATABASES[id(self)], built.sql, dict(built.params)))
        return await original_execute(self, query, timeout_s=timeout_s)

    SqliteFts5Provider.__init__ = init  # type: ignore[method-assign]
    SqliteFts5Provider.execute = execute  # type: ignore[method-assign,assignment]

    def stop() -> None:
        SqliteFts5Provider.execute = original_execute  # type: ignore[method-assign]

    return stop


def _serving_stack() -> str:
    """The event loop and HTTP parser both servers run on, as uvicorn's "auto" picks them."""
    loop = "asyncio" if serving_loop_factory() is None else "uvloop"
    http = "httptools" if importlib.util.find_spec("httptools") is not None else "h11"
    return f"{loop} event loop, {http} HTTP parser"


@contextlib.contextmanager
def _in_thread(
    serve: Callable[[], Coroutine[Any, Any, None]],
    started: threading.Event,
    stop: Callable[[], None],
) -> Iterator[None]:
    """Run ``serve`` on its own thread and event loop until the block ends, then stop it."""
    thread = threading.Thread(target=lambda: run_serving(serve), daemon=True)
    thread.start()
    try:
        if not started.wait(timeout=60):
            msg = "uvicorn did not start"
            raise RuntimeError(msg)
        yield
    finally:
        stop()
        thread.join(timeout=60)


# "state": the embedded host's own durable audit (state.db, SQLite, wait_for_write), what
# `esra serve` does with no settings; the others replace it for comparison.
AUDIT_SINKS = ("state", "logging", "sqlite", "jsonl", "postgres")


@contextlib.asynccontextmanager
async def _audit_backend(kind: str, data_dir: Path, dsn: str) -> AsyncIterator[AuditBackend]:
    """The durable backend ``kind`` names, opened for the run and closed (or dropped) after."""
    if kind == "jsonl":
        from esra.core._audit.jsonl import JsonLinesAuditLog  # noqa: PLC0415

        yield JsonLinesAuditLog(data_dir / "audit.jsonl")
    elif kind == "sqlite":
        from esra.sqlite._audit import SqliteAuditLog  # noqa: PLC0415

        log = SqliteAuditLog(data_dir / "audit.db")
        await log.initialize()
        try:
            yield log
        finally:
            await log.close()
    else:
        import psycopg  # noqa: PLC0415
        from psycopg import sql  # noqa: PLC0415

        from esra.postgres._audit import PostgresAuditLog  # noqa: PLC0415
        from esra.postgres._audit_schema import apply_audit_schema  # noqa: PLC0415

        schema = f"esra_bench_audit_{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await apply_audit_schema(conn, schema)
        pg = await PostgresAuditLog.open(dsn, schema=schema)
        try:
            yield pg
        finally:
            await pg.close()
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


class _AuditedHost(HostServer):
    """``HostServer`` whose parts send audit records to ``kind`` instead of the host's own.

    ``logging`` is the in-memory logger the host used before it kept state; the durable kinds
    go through ``BatchingAuditSink`` with ``wait_for_write`` on, as the host's own does (a
    call is answered only after its records are committed).
    """

    def __init__(self, kind: str, data_dir: Path, dsn: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kind, self._data_dir, self._dsn = kind, data_dir, dsn
        # Records the durable sink wrote; None for the logger, which counts nothing.
        self.written: int | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        inner = self._open_parts
        async with contextlib.AsyncExitStack() as stack:
            sink: AuditSink
            batching: BatchingAuditSink | None = None
            if self._kind == "logging":
                sink = LoggingAuditSink()
            else:
                backend = await stack.enter_async_context(
                    _audit_backend(self._kind, self._data_dir, self._dsn)
                )
                batching = BatchingAuditSink(backend, wait_for_write=True)
                sink = batching

            @contextlib.asynccontextmanager
            async def with_sink() -> AsyncIterator[HostParts]:
                async with inner() as parts:
                    yield attrs.evolve(parts, audit=sink)

            self._open_parts = with_sink
            try:
                await super().serve(sockets)
            finally:
                self._open_parts = inner
                if batching is not None:
                    await batching.aclose()
                    self.written = batching.written


def _bare_app(statements: Sequence[Statement]) -> Starlette:
    local = threading.local()

    def run() -> list[list[Any]]:
        connections: dict[str, sqlite3.Connection] = local.__dict__.setdefault("c", {})
        rows: list[list[Any]] = []
        for database, sql, params in statements:
            conn = connections.get(database)
            if conn is None:
                conn = connections[database] = open_readonly(database)
            rows.extend(list(r) for r in conn.execute(sql, params).fetchall())
        return rows

    async def search(request: Request) -> JSONResponse:
        await request.body()
        rows = await anyio.to_thread.run_sync(run)
        return JSONResponse({"rows": rows}, headers={"cache-control": "no-store"})

    return Starlette(routes=[Route("/search", search, methods=["POST"])])


async def _load(
    call: Callable[[Any], Awaitable[None]],
    open_client: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
    clients: int,
    calls: int,
) -> tuple[list[float], float]:
    latencies: list[float] = []
    per_client = [calls // clients + (1 if n < calls % clients else 0) for n in range(clients)]

    async def worker(count: int) -> None:
        async with open_client() as client:
            await call(client)  # warm the connection and session
            ready.wait_count += 1
            await go.wait()
            for _ in range(count):
                started = time.perf_counter()
                await call(client)
                latencies.append(time.perf_counter() - started)

    class _Ready:
        wait_count = 0

    ready = _Ready()
    go = asyncio.Event()
    tasks = [asyncio.create_task(worker(n)) for n in per_client]
    while ready.wait_count < clients:
        await asyncio.sleep(0.01)
    started = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    return latencies, time.perf_counter() - started


def _cpu_seconds() -> float:
    """This process's user + system CPU time so far, in seconds (``/proc/self/stat``)."""
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


Load = tuple[list[float], float]


async def _sdk_side(url: str, token: str, clients: int, calls: int) -> Load:
    @contextlib.asynccontextmanager
    async def open_client() -> Any:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            yield client

    async def call(client: Any) -> None:
        result = await client.call_tool(TOOL, {"prompt": PROMPT})
        if result.structured_content is None:
            msg = f"ESRA call failed: {result.content}"
            raise RuntimeError(msg)

    return await _load(call, open_client, clients, calls)


def _http_side(
    url: str,
    headers: dict[str, str],
    body: bytes,
    check: Callable[[Any], bool],
    *,
    clients: int,
    calls: int,
) -> Load:
    """The one client both sides share: the same POST each call, its JSON parsed and checked."""

    @contextlib.asynccontextmanager
    async def open_client() -> Any:
        async with httpx2.AsyncClient(headers=headers) as http:
            yield http

    async def call(http: Any) -> None:
        response = await http.post(url, content=body)
        response.raise_for_status()
        if not check(response.json()):
            msg = f"call failed: {response.text[:500]}"
            raise RuntimeError(msg)

    return asyncio.run(_load(call, open_client, clients, calls))


def _esra_ok(message: Any) -> bool:
    result = message.get("result") or {}
    structured = result.get("structuredContent") or {}
    return not result.get("isError") and bool(structured.get("results"))


def _bare_ok(message: Any) -> bool:
    return bool(message.get("rows"))


async def _warm_up(url: str, token: str) -> RecordedCall:
    """One SDK call: checks ESRA answers, records its SQL and the SDK's ``tools/call`` request."""
    sent: list[RecordedCall] = []

    async def remember(request: Any) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            kept = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
            sent.append((kept, request.content))

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, event_hooks={"request": [remember]}
        ) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool(TOOL, {"prompt": PROMPT})
    content = result.structured_content or {}
    if not content.get("results") or not RECORDED or len(sent) != 1:
        msg = f"the warm-up call found nothing: {content or result.content}"
        raise RuntimeError(msg)
    return sent[0]


def _client_process(
    side: str, url: str, token: str, call: RecordedCall | None, *, clients: int, calls: int
) -> Load:
    """Run one side's load from a separate process, so clients do not share the servers' GIL."""
    if side == "bare":
        headers = {"content-type": "application/json"}
        body = json.dumps({"prompt": PROMPT}).encode()
        return _http_side(f"{url}/search", headers, body, _bare_ok, clients=clients, calls=calls)
    if call is None:
        return asyncio.run(_sdk_side(url, token, clients, calls))
    headers = {**call[0], "authorization": f"Bearer {token}"}
    return _http_side(f"{url}/mcp", headers, call[1], _esra_ok, clients=clients, calls=calls)


def _measure(
    data_dir: Path,
    token: str,
    clients: int,
    calls: int,
    *,
    sdk_client: bool,
    rounds: int,
    stop_recording: Callable[[], None],
    audit: str = "state",
    audit_dsn: str = "",
) -> tuple[list[tuple[Result, Result]], int, int | None]:
    esra_port, bare_port = free_port(), free_port()
    # Settled as `esra serve` settles its process once it listens (the bare route, served
    # by the same process, gains from it as much as ESRA does).
    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": esra_port,
        "log_level": "warning",
        "settle_heap": True,
    }
    host = (
        HostServer(lambda: open_embedded(data_dir), **options)
        if audit == "state"
        else _AuditedHost(audit, data_dir, audit_dsn, lambda: open_embedded(data_dir), **options)
    )
    esra_url, bare_url = f"http://127.0.0.1:{esra_port}", f"http://127.0.0.1:{bare_port}"
    spawn = multiprocessing.get_context("spawn")
    with (
        _in_thread(host.serve, host.started, host.stop),
        ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool,
    ):
        recorded_call = asyncio.run(_warm_up(esra_url, token))
        stop_recording()
        statements = list(RECORDED)
        config = uvicorn.Config(
            _bare_app(statements),
            host="127.0.0.1",
            port=bare_port,
            log_level="warning",
            lifespan="off",
            ws="none",
        )
        bare = uvicorn.Server(config)
        bare_started = threading.Event()

        async def serve_bare() -> None:
            task = asyncio.create_task(bare.serve())
            while not bare.started:
                await asyncio.sleep(0.01)
            bare_started.set()
            await task

        def stop_bare() -> None:
            bare.should_exit = True

        esra_call = None if sdk_client else recorded_call

        def run(side: str, url: str, call: RecordedCall | None) -> Result:
            before = _cpu_seconds()
            latencies, seconds = pool.submit(
                _client_process, side, url, token, call, clients=clients, calls=calls
            ).result()
            return latencies, seconds, _cpu_seconds() - before

        results: list[tuple[Result, Result]] = []
        with _in_thread(serve_bare, bare_started, stop_bare):
            for _ in range(rounds):
                bare_result = run("bare", bare_url, None)
                esra_result = run("esra", esra_url, esra_call)
                results.append((esra_result, bare_result))
    if len(RECORDED) != len(statements):
        msg = "statements were still being recorded while ESRA was measured"
        raise RuntimeError(msg)
    written = host.written if isinstance(host, _AuditedHost) else None
    return results, len(statements), written


class _CountingExporter:
    """A span exporter that counts what it is handed and drops it (no network in a bench)."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[Any]) -> Any:
        self.count += len(spans)
        return importlib.import_module("opentelemetry.sdk.trace.export").SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _install_tracing() -> _CountingExporter:
    """Install the SDK globally: every span sampled and batch-exported, metrics read in memory."""
    from opentelemetry import metrics, trace  # noqa: PLC0415 - only with --tracing

    sdk_trace = importlib.import_module("opentelemetry.sdk.trace")
    sdk_export = importlib.import_module("opentelemetry.sdk.trace.export")
    sdk_metrics = importlib.import_module("opentelemetry.sdk.metrics")
    sdk_metrics_export = importlib.import_module("opentelemetry.sdk.metrics.export")
    exporter = _CountingExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(sdk_export.BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    reader = sdk_metrics_export.InMemoryMetricReader()
    metrics.set_meter_provider(sdk_metrics.MeterProvider(metric_readers=[reader]))
    return exporter


def _throughput(result: Result) -> float:
    latencies, seconds, _ = result
    return len(latencies) / seconds


def main() -> None:
    """Serve both sides on loopback, load each in turn, print latencies and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="100 calls")
    parser.add_argument(
        "--sdk-client", action="store_true", help="load ESRA through the MCP SDK's Client"
    )
    parser.add_argument("--rounds", type=int, default=1, help="alternating bare/ESRA runs")
    parser.add_argument("--audit", choices=AUDIT_SINKS, default="state", help="audit sink")
    parser.add_argument(
        "--tracing", action="store_true", help="record every span and metric (SDK installed)"
    )
    parser.add_argument(
        "--audit-dsn",
        default=os.environ.get("ESRA_TEST_POSTGRES_DSN", ""),
        help="PostgreSQL for --audit postgres (default: $ESRA_TEST_POSTGRES_DSN)",
    )
    args = parser.parse_args()
    if args.audit == "postgres" and not args.audit_dsn:
        parser.error("--audit postgres needs --audit-dsn or $ESRA_TEST_POSTGRES_DSN")
    calls = 100 if args.quick else args.calls
    spans = _install_tracing() if args.tracing else None
    stop_recording = _record_statements()
    with tempfile.TemporaryDirectory(prefix="esra-bench-host-") as tmp:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            argv = ["dev-token", "--tenant", TENANT, "--subject", "bench", "--data-dir", tmp]
            argv += ["--claim", "region=emea"]  # the support desk's record-level security
            if cli_main(argv) != 0:
                msg = "esra dev-token failed"
                raise RuntimeError(msg)
        token = out.getvalue().strip()
        results, statements, written = _measure(
            Path(tmp),
            token,
            args.clients,
            calls,
            sdk_client=args.sdk_client,
            rounds=max(1, args.rounds),
            stop_recording=stop_recording,
            audit=args.audit,
            audit_dsn=args.audit_dsn,
        )
    client = "MCP SDK Client" if args.sdk_client else "identical httpx clients"
    print(
        f"host_load: {args.clients} concurrent clients ({client}), {calls} calls each side, "
        f"{statements} SQLite statements per invocation, loopback uvicorn, clients in a "
        f"second process; {_serving_stack()}; audit sink: {args.audit}"
        + (f" ({written} records written)" if written is not None else "")
        + (f"; tracing on ({spans.count} spans recorded)" if spans is not None else "")
    )
    print(f"{'side':<30} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>8} {'CPU ms/call':>12}")
    ratios: list[float] = []
    cpu: dict[str, list[float]] = {"esra": [], "bare": []}
    clients = args.clients
    for esra, bare in results:
        for side, name, (lat, seconds, cpu_s) in (
            ("esra", "ESRA MCP tool call", esra),
            ("bare", "bare Starlette route, same SQL", bare),
        ):
            p50, p99 = _percentile(lat, 0.5) * 1000, _percentile(lat, 0.99) * 1000
            # Each client also made one warm-up call, which the CPU figure includes.
            per_call = cpu_s / (len(lat) + clients) * 1000
            cpu[side].append(per_call)
            print(
                f"{name:<30} {p50:>8.2f} {p99:>8.2f} {len(lat) / seconds:>8.1f} {per_call:>12.2f}"
            )
        ratios.append(_throughput(esra) / _throughput(bare))
    shown = ", ".join(f"{r:.2f}" for r in ratios)
    median = statistics.median(ratios)
    print(f"ESRA throughput / bare route throughput: {median:.2f} (rounds: {shown}; target >= 0.6)")
    esra_cpu, bare_cpu = statistics.median(cpu["esra"]), statistics.median(cpu["bare"])
    print(
        f"server CPU per call (median of rounds): ESRA {esra_cpu:.2f} ms, bare {bare_cpu:.2f} ms "
        f"({esra_cpu / bare_cpu:.1f}x)"
    )


if __name__ == "__main__":
    main()
