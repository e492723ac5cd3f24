"""ESRA's host CPU per call on the DBHub bench's setup, with the host alone on the machine.

``bench/peer_dbhub.py`` moves with both servers and with the machine; ``bench/
peer_instructions.py`` counts instructions, which can overstate a change (a tight C loop
retires many instructions per nanosecond). This bench times the host itself: the DBHub
bench's ESRA host alone — the same settings, table and question, one ``esra serve
--config`` process, no DBHub — driven by ``--clients`` concurrent clients from a separate
process (the replayed ``tools/call`` of the MCP SDK's client, every answer checked),
``--calls`` calls per run after a warm-up run, ``--runs`` runs. Printed per run: calls/s
and the host process's user and system CPU milliseconds per call (``/proc/<pid>/stat``),
then the medians. Two versions of the code are compared by running this on each in turn,
twice (A, B, A, B): the machine drifts between runs more than within one.

Skipped, with a message and exit status 0, when PostgreSQL cannot be reached.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._mcp_load import _stat_fields
from bench._serve_hosts import STATE_PASSWORD_ENV, serve_host
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=DEFAULT_DSN, help=f"PostgreSQL ({DEFAULT_DSN})")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--calls", type=int, default=3000, help="calls per run")
    parser.add_argument("--runs", type=int, default=2, help="measured runs")
    parser.add_argument("--quick", action="store_true", help="one run of 500 calls")
    parser.add_argument("--rows", type=int, default=100_000, help="documents in the table")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.runs = 500, 1
    if not _reachable(args.dsn):
        return 0
    runs: list[tuple[float, float, float]] = []
    with (
        one_esra_host(args.dsn, args.rows, prefix="esra-bench-cpu-") as setup,
        serve_host(
            "ESRA",
            setup.settings,
            setup.work / "esra.log",
            env={STATE_PASSWORD_ENV: "unused-by-trust-auth"},
        ) as host,
    ):
        call = _esra_call(host, setup.token, _question())
        pid = host.process.pid
        _client_process("ESRA", host.url, call, clients=args.clients, calls=WARM_UP_CALLS)
        for _ in range(max(1, args.runs)):
            user, system = _user_system_s(pid)
            _, wall = _client_process(
                "ESRA", host.url, call, clients=args.clients, calls=args.calls
            )
            user_after, system_after = _user_system_s(pid)
            ms_per_call = 1000 / args.calls
            user_ms = (user_after - user) * ms_per_call
            system_ms = (system_after - system) * ms_per_call
            runs.append((args.calls / wall, user_ms, system_ms))
    print(
        f"peer_host_cpu: ESRA's host of bench/peer_dbhub.py alone (one `esra serve --config` "
        f"process, PostgreSQL source of {args.rows} documents, state and audit in PostgreSQL, "
        f"LocalModel); {args.clients} clients in a separate process, {args.calls} calls per run"
    )
    print(f"{'run':<6} {'calls/s':>9} {'user ms/call':>13} {'system ms/call':>15}")
    for number, (rate, user_ms, system_ms) in enumerate(runs, start=1):
        print(f"{number:<6} {rate:>9.1f} {user_ms:>13.3f} {system_ms:>15.3f}")
    rate, user_ms, system_ms = (statistics.median(column) for column in zip(*runs, strict=True))
    print(f"{'median':<6} {rate:>9.1f} {user_ms:>13.3f} {system_ms:>15.3f}")
    print(f"host CPU per call (median): {user_ms + system_ms:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
