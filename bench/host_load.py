"""Host load: concurrent MCP clients against ``esra serve``'s embedded default vs. a bare route.

The embedded default (``open_embedded``: the demo tenant's SQLite sources, the empty document
store, ``LocalModel``) is served by uvicorn on 127.0.0.1 through ``HostServer``, exactly as
``esra serve`` does; a development token (``esra dev-token``) authenticates. One warm-up call
records the statements that invocation sent to SQLite (built by each provider's own
``StatementBuilder``). Side by side, a bare Starlette app with one route, served by uvicorn
on another loopback port, runs those very statements on read-only connections (in a worker
thread) and returns the rows as JSON.

``--clients`` concurrent clients (MCP SDK ``Client`` over streamable HTTP for ESRA, ``httpx``
POSTs for the bare route) make ``--calls`` calls in all. Printed: p50, p99 and calls per
second of both, and ESRA's throughput as a share of the bare route's (target ≥ 0.6). The
servers and the clients share this process (and the machine's cores), for both sides alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import multiprocessing
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from esra.core.query import ResultRow
from esra.core.validation import ValidatedQuery
from esra.sqlite import SqliteFts5Provider, open_readonly
from esra.starlette.cli import main as cli_main
from esra.starlette.embedded import open_embedded
from esra.starlette.serve import HostServer

TENANT = "larkspur"
TOOL = "esra_larkspur"
PROMPT = "my e-bike battery is not charging"
Statement = tuple[str, str, dict[str, Any]]
RECORDED: list[Statement] = []
_DATABASES: dict[int, str] = {}
Result = tuple[list[float], float]


def _record_statements() -> None:
    """Wrap ``SqliteFts5Provider`` so each execution's built statement is remembered."""
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
    SqliteFts5Provider.execute = execute  # type: ignore[method-assign]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def _in_thread(
    serve: Callable[[], Coroutine[Any, Any, None]],
    started: threading.Event,
    stop: Callable[[], None],
) -> Iterator[None]:
    """Run ``serve`` on its own thread and event loop until the block ends, then stop it."""
    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    try:
        if not started.wait(timeout=60):
            msg = "uvicorn did not start"
            raise RuntimeError(msg)
        yield
    finally:
        stop()
        thread.join(timeout=60)


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


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _esra_side(url: str, token: str, clients: int, calls: int) -> tuple[list[float], float]:
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


async def _bare_side(url: str, clients: int, calls: int) -> tuple[list[float], float]:
    @contextlib.asynccontextmanager
    async def open_client() -> Any:
        async with httpx2.AsyncClient() as http:
            yield http

    async def call(http: Any) -> None:
        response = await http.post(f"{url}/search", json={"prompt": PROMPT})
        response.raise_for_status()

    return await _load(call, open_client, clients, calls)


async def _warm_up(url: str, token: str) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool(TOOL, {"prompt": PROMPT})
    content = result.structured_content or {}
    if not content.get("results") or not RECORDED:
        msg = f"the warm-up call found nothing: {content or result.content}"
        raise RuntimeError(msg)


def _client_process(side: str, url: str, token: str, clients: int, calls: int) -> Result:
    """Run one side's load from a separate process, so clients do not share the servers' GIL."""
    if side == "esra":
        return asyncio.run(_esra_side(url, token, clients, calls))
    return asyncio.run(_bare_side(url, clients, calls))


def _measure(data_dir: Path, token: str, clients: int, calls: int) -> tuple[Result, Result, int]:
    esra_port, bare_port = _free_port(), _free_port()
    host = HostServer(
        lambda: open_embedded(data_dir), host="127.0.0.1", port=esra_port, log_level="warning"
    )
    esra_url, bare_url = f"http://127.0.0.1:{esra_port}", f"http://127.0.0.1:{bare_port}"
    spawn = multiprocessing.get_context("spawn")
    with (
        _in_thread(host.serve, host.started, host.stop),
        ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool,
    ):
        asyncio.run(_warm_up(esra_url, token))
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

        with _in_thread(serve_bare, bare_started, stop_bare):
            bare_result = pool.submit(
                _client_process, "bare", bare_url, "", clients, calls
            ).result()
            esra_result = pool.submit(
                _client_process, "esra", esra_url, token, clients, calls
            ).result()
    return esra_result, bare_result, len(statements)


def main() -> None:
    """Serve both sides on loopback, load each in turn, print latencies and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="100 calls")
    args = parser.parse_args()
    calls = 100 if args.quick else args.calls
    _record_statements()
    with tempfile.TemporaryDirectory(prefix="esra-bench-host-") as tmp:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            argv = ["dev-token", "--tenant", TENANT, "--subject", "bench", "--data-dir", tmp]
            argv += ["--claim", "region=emea"]  # the support desk's record-level security
            if cli_main(argv) != 0:
                msg = "esra dev-token failed"
                raise RuntimeError(msg)
        token = out.getvalue().strip()
        (esra_lat, esra_s), (bare_lat, bare_s), statements = _measure(
            Path(tmp), token, args.clients, calls
        )
    print(
        f"host_load: {args.clients} concurrent clients, {calls} calls each side, "
        f"{statements} SQLite statements per invocation, loopback uvicorn, clients in a "
        "second process"
    )
    print(f"{'side':<30} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>8}")
    for name, lat, seconds in (
        ("ESRA MCP tool call", esra_lat, esra_s),
        ("bare Starlette route, same SQL", bare_lat, bare_s),
    ):
        p50, p99 = _percentile(lat, 0.5) * 1000, _percentile(lat, 0.99) * 1000
        print(f"{name:<30} {p50:>8.2f} {p99:>8.2f} {len(lat) / seconds:>8.1f}")
    ratio = (len(esra_lat) / esra_s) / (len(bare_lat) / bare_s)
    print(f"ESRA throughput / bare route throughput: {ratio:.2f} (target >= 0.6)")


if __name__ == "__main__":
    main()
