"""ESRA's host CPU per call on the DBHub bench's setup, with the host alone on the machine.

``bench/peer_dbhub.py`` moves with both servers and with the machine; ``bench/
peer_instructions.py`` counts instructions, which can overstate a change (a tight C loop
retires many instructions per nanosecond). This bench times the host itself: the DBHub
bench's ESRA host alone — the same settings, table and question, one ``esra serve
--config`` process, no DBHub — driven by ``--clients`` concurrent clients from a separate
process (the replayed ``tools/call`` of the MCP SDK's client, every answer checked),
``--calls`` calls per run after a warm-up run, ``--runs`` runs. Printed per run: calls/s
and the host process's user and system CPU milliseconds per call (``/proc/<pid>/stat``),
then the medians. Two versions of the code are compared in turn, since the machine drifts
between runs more than within one: ``--baseline REV`` also serves a host built from revision
``REV``'s packages (``bench/_baseline.py``; it waits idle while the other is measured) and
alternates the two run by run — baseline first in odd runs, the working tree first in even
ones — then prints both medians and the working tree's over the baseline's.

Skipped, with a message and exit status 0, when PostgreSQL cannot be reached.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._baseline import exported, note_inherited_pythonpath, serving_environment
from bench._mcp_load import _stat_fields
from bench._serve_hosts import STATE_PASSWORD_ENV, ServeHost, serve_host
from bench.peer_dbhub import (
    DEFAULT_DSN,
    _client_process,
    _esra_call,
    _question,
    _reachable,
    one_esra_host,
)

WARM_UP_CALLS = 300


def _user_system_s(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    fields = _stat_fields(pid)
    return int(fields[11]) / ticks, int(fields[12]) / ticks


# One measured run: calls/s, and the host's user and system CPU milliseconds per call.
Run = tuple[float, float, float]


def _measure(host: ServeHost, call: Any, *, clients: int, calls: int) -> Run:
    """One run of ``calls`` calls from ``clients`` clients against ``host``."""
    pid = host.process.pid
    user, system = _user_system_s(pid)
    _, wall = _client_process("ESRA", host.url, call, clients=clients, calls=calls)
    user_after, system_after = _user_system_s(pid)
    ms_per_call = 1000 / calls
    return calls / wall, (user_after - user) * ms_per_call, (system_after - system) * ms_per_call


def _print_runs(name: str, runs: list[Run]) -> Run:
    """Print ``runs`` of the host ``name`` and their medians; return the medians."""
    print(f"{name}:")
    print(f"{'run':<6} {'calls/s':>9} {'user ms/call':>13} {'system ms/call':>15}")
    for number, (rate, user_ms, system_ms) in enumerate(runs, start=1):
        print(f"{number:<6} {rate:>9.1f} {user_ms:>13.3f} {system_ms:>15.3f}")
    rate, user_ms, system_ms = (statistics.median(column) for column in zip(*runs, strict=True))
    print(f"{'median':<6} {rate:>9.1f} {user_ms:>13.3f} {system_ms:>15.3f}")
    print(f"host CPU per call (median): {user_ms + system_ms:.3f} ms")
    return rate, user_ms, system_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=DEFAULT_DSN, help=f"PostgreSQL ({DEFAULT_DSN})")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--calls", type=int, default=3000, help="calls per run")
    parser.add_argument("--runs", type=int, default=2, help="measured runs")
    parser.add_argument("--quick", action="store_true", help="one run of 500 calls")
    parser.add_argument("--rows", type=int, default=100_000, help="documents in the table")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure a host built from revision REV's packages, alternating run by run",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls, args.runs = 500, 1
    if not _reachable(args.dsn):
        return 0
    names = ["working tree", f"baseline {args.baseline}"] if args.baseline else ["ESRA"]
    runs: dict[str, list[Run]] = {name: [] for name in names}
    with (
        contextlib.ExitStack() as stack,
        one_esra_host(args.dsn, args.rows, prefix="esra-bench-cpu-") as setup,
    ):
        hosts: dict[str, ServeHost] = {}
        for name in names:
            tree = stack.enter_context(exported(args.baseline)) if name != names[0] else None
            environment = {**serving_environment(tree), STATE_PASSWORD_ENV: "unused-by-trust-auth"}
            log = setup.work / f"esra-{len(hosts)}.log"
            settings = setup.settings if tree is None else setup.baseline_settings
            hosts[name] = stack.enter_context(serve_host(name, settings, log, env=environment))
        calls = {name: _esra_call(host, setup.token, _question()) for name, host in hosts.items()}
        for name, host in hosts.items():
            _client_process(
                "ESRA", host.url, calls[name], clients=args.clients, calls=WARM_UP_CALLS
            )
        for number in range(max(1, args.runs)):
            # Odd runs baseline first, even runs the working tree first: neither always
            # follows the other's run.
            order = names[::-1] if number % 2 == 0 else names
            for name in order:
                measured = _measure(
                    hosts[name], calls[name], clients=args.clients, calls=args.calls
                )
                runs[name].append(measured)
    print(
        f"peer_host_cpu: ESRA's host of bench/peer_dbhub.py alone (one `esra serve --config` "
        f"process, PostgreSQL source of {args.rows} documents, state and audit in PostgreSQL, "
        f"LocalModel); {args.clients} clients in a separate process, {args.calls} calls per run"
    )
    note_inherited_pythonpath()
    medians = {name: _print_runs(name, runs[name]) for name in names}
    if args.baseline:
        (rate, user_ms, system_ms), (base_rate, base_user, base_system) = medians.values()
        cpu_ratio = (user_ms + system_ms) / (base_user + base_system)
        print(
            f"working tree / baseline: calls/s {rate / base_rate:.3f}, CPU per call {cpu_ratio:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
