"""Load helpers for benches that replay one MCP ``tools/call`` against a server over HTTP.

What ``bench/host_load.py`` and ``bench/host_scale.py`` do, for any MCP server: one warm-up
call with the MCP SDK's ``Client`` records the HTTP request the SDK sent for its
``tools/call`` (stateless streamable HTTP: one self-contained POST), and the load then
replays that very request from ``clients`` concurrent ``httpx`` clients on kept-alive
connections, each response parsed (JSON or a one-event SSE stream) and checked. Also the
measurement helpers: percentiles, the CPU time of a process tree from ``/proc`` and the load
average.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

__all__ = [
    "RecordedCall",
    "Result",
    "descendants",
    "load",
    "load_average",
    "message_of",
    "percentile",
    "process_cpu_s",
    "record_tools_call",
]

# The SDK client's ``tools/call`` request: its headers (minus the connection's own) and body.
RecordedCall = tuple[dict[str, str], bytes]
# Latencies (seconds) and the run's duration.
Result = tuple[list[float], float]
_HOP_HEADERS = frozenset({"host", "content-length", "connection", "authorization"})
TIMEOUT_S = 60.0


async def record_tools_call(
    url: str, tool: str, arguments: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> tuple[RecordedCall, Any]:
    """One SDK call of ``tool`` on the MCP endpoint ``url``: the request it sent, and its result.

    ``headers`` (an ``Authorization``, say) go with every request and are left out of the
    recording; a replay adds its own.

    Raises:
        RuntimeError: the SDK sent no ``tools/call`` request, or more than one.
    """
    sent: list[RecordedCall] = []

    async def remember(request: Any) -> None:
        if request.headers.get("mcp-method") == "tools/call":
            kept = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
            sent.append((kept, request.content))

    async with (
        httpx2.AsyncClient(
            headers=dict(headers or {}), event_hooks={"request": [remember]}, timeout=TIMEOUT_S
        ) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool(tool, dict(arguments))
    if len(sent) != 1:
        msg = f"expected one tools/call request to {url}, the SDK sent {len(sent)}"
        raise RuntimeError(msg)
    return sent[0], result


def message_of(response: httpx2.Response) -> Any:
    """The JSON-RPC message a streamable HTTP response carries: its JSON body, or the last
    ``data:`` event of an SSE stream (a server may answer a single call either way)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line[:5] == "data:"]
        if not data:
            msg = f"an SSE response without data: {response.text[:500]}"
            raise RuntimeError(msg)
        return json.loads(data[-1])
    return response.json()


async def _load(
    url: str,
    headers: dict[str, str],
    body: bytes,
    check: Callable[[Any], bool],
    *,
    clients: int,
    calls: int,
) -> Result:
    latencies: list[float] = []
    per_client = [calls // clients + (1 if n < calls % clients else 0) for n in range(clients)]
    ready = 0
    go = asyncio.Event()

    async def call(http: httpx2.AsyncClient) -> None:
        response = await http.post(url, content=body)
        response.raise_for_status()
        if not check(message_of(response)):
            msg = f"call to {url} failed: {response.text[:500]}"
            raise RuntimeError(msg)

    async def client(count: int) -> None:
        nonlocal ready
        async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http:
            await call(http)  # a kept-alive connection before the clock starts
            ready += 1
            await go.wait()
            for _ in range(count):
                started = time.perf_counter()
                await call(http)
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


def load(
    url: str,
    headers: dict[str, str],
    body: bytes,
    check: Callable[[Any], bool],
    *,
    clients: int,
    calls: int,
) -> Result:
    """``clients`` concurrent clients POST ``body`` to ``url``, ``calls`` calls in all.

    Each client first makes one call of its own to open its connection (not measured); then
    all start together. ``check`` is given each response's JSON-RPC message and must accept
    it. Run it in a process of its own, so the clients share no interpreter with a server.
    """
    return asyncio.run(_load(url, headers, body, check, clients=clients, calls=calls))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` shows them."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _stat_fields(pid: int) -> list[str]:
    # The fields after the command's closing parenthesis (the command may hold spaces).
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, from ``/proc`` (empty off Linux)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            parent = int(_stat_fields(entry)[1])  # field 4, ppid
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(entry)
    tree, pending = [], [pid]
    while pending:
        current = pending.pop()
        tree.append(current)
        pending.extend(children.get(current, ()))
    return tree


def process_cpu_s(pids: Sequence[int]) -> dict[int, float]:
    """User plus system CPU seconds each live process of ``pids`` used so far (Linux only).

    A process that is gone (or a system without ``/proc``) is left out; compare two readings
    per pid, so a process that started in between counts from zero.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    seconds: dict[int, float] = {}
    for pid in pids:
        try:
            fields = _stat_fields(pid)
            seconds[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        except (OSError, IndexError, ValueError):
            continue
    return seconds
