"""Host instructions per call on the DBHub bench's setup: ESRA's PostgreSQL host, by callgrind.

``bench/peer_dbhub.py`` compares ESRA with DBHub by time, and CPU time per call moves with
whatever else the machine does. This bench counts instead, on the same setup: ``esra serve
--config`` with one tenant whose PostgreSQL source maps the synthetic table of ``--rows``
documents, its configuration, secrets and audit in PostgreSQL, the offline ``LocalModel``,
one process (``--esra-workers 1``), asking the bench's question. The host runs under
``valgrind --tool=callgrind`` with instrumentation off until three warm-up calls are done
(the first is the MCP SDK client's, whose request is replayed), then ``--calls`` sequential
calls are counted, every thread of the process included.

``--baseline REV`` also counts the host built from revision ``REV``'s packages in the same
run (``bench/_baseline.py``) and prints the working tree's count over the baseline's.

``--breakdown`` also counts the host with one part of the call at a time replaced by a
near-free stand-in that keeps every answer valid (``bench/_call_parts.py``, PostgreSQL
flavour): the LocalModel's reasoning, the statements (no pool, pipeline or round trip), the
audit commits, and the whole retrieve; see ``bench/host_instructions.py``.

Counts are of user space only: what the kernel does for the process's system calls (the
PostgreSQL protocol and HTTP sockets) is not in them, while ``bench/peer_dbhub.py``'s CPU
time includes it. Skipped, with a message and exit status 0, when PostgreSQL cannot be
reached or valgrind is not installed. About a minute on a quiet two-core machine,
``--breakdown`` included.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._baseline import exported, note_inherited_pythonpath, serving_environment
from bench._call_parts import STAND_INS, print_breakdown
from bench._serve_hosts import STATE_PASSWORD_ENV, serve_host
from bench.host_instructions import (
    START_TIMEOUT_S,
    WARM_UP_CALLS,
    _answer,
    _callgrind_control,
    _dumped_instructions,
)
from bench.peer_dbhub import (
    DEFAULT_DSN,
    OneHost,
    _esra_call,
    _esra_ok,
    _question,
    _reachable,
    one_esra_host,
)

ROOT = str(Path(__file__).resolve().parents[1])


def _count(setup: OneHost, *, calls: int, stand_in: str | None, tree: Path | None = None) -> float:
    """Million instructions per call of one host (``stand_in`` replacing that part, if any;
    serving ``tree``'s sources instead of the working tree's, if given)."""
    name = stand_in or "deployed"
    if tree is not None:
        name += "-baseline"
    preamble: list[str] = []
    if stand_in is not None:
        preamble = [f"sys.path.insert(0, {ROOT!r})", "from bench._call_parts import install"]
        preamble.append(f"install({stand_in!r}, engine='postgres')")
    out = setup.work / f"callgrind-{name}"
    launcher = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    launcher.append(f"--callgrind-out-file={out}.%p")
    with serve_host(
        f"ESRA ({name})",
        setup.settings if tree is None else setup.baseline_settings,
        setup.work / f"esra-{name}.log",
        env={**serving_environment(tree), STATE_PASSWORD_ENV: "unused-by-trust-auth"},
        preamble=preamble,
        launcher=launcher,
        start_timeout_s=START_TIMEOUT_S,
    ) as host:
        headers, body = _esra_call(host, setup.token, _question())
        url = f"{host.url}/mcp"
        with httpx2.Client(timeout=600) as client:
            for _ in range(WARM_UP_CALLS - 1):
                _answer(client, url, headers, body, _esra_ok)
            pid = str(host.process.pid)
            _callgrind_control("-i", "on", pid)
            for _ in range(calls):
                _answer(client, url, headers, body, _esra_ok)
            _callgrind_control("-d", pid)
        return _dumped_instructions(out, host.process.pid) / calls / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=DEFAULT_DSN, help=f"PostgreSQL ({DEFAULT_DSN})")
    parser.add_argument("--calls", type=int, default=40, help="counted calls per host")
    parser.add_argument("--quick", action="store_true", help="10 counted calls per host")
    parser.add_argument("--rows", type=int, default=100_000, help="documents in the table")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also count the host built from revision REV's packages and print the working "
        "tree's count over it",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also count the host with each part of its call replaced by a near-free stand-in",
    )
    args = parser.parse_args()
    if args.quick:
        args.calls = 10
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("peer_instructions: needs valgrind (apt-get install valgrind); skipped")
        return 0
    if not _reachable(args.dsn):
        return 0
    with (
        contextlib.ExitStack() as stack,
        one_esra_host(args.dsn, args.rows, prefix="esra-bench-peer-") as setup,
    ):
        baseline = stack.enter_context(exported(args.baseline)) if args.baseline else None
        jobs: list[tuple[str | None, Path | None]] = [(None, None)]
        if baseline is not None:
            jobs.append((None, baseline))
        if args.breakdown:
            jobs += [(part, None) for part in STAND_INS]
        # Two at a time: counts do not depend on what else runs, only the wait does.
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = list(
                pool.map(
                    lambda job: _count(setup, calls=args.calls, stand_in=job[0], tree=job[1]),
                    jobs,
                )
            )
    print(
        f"peer_instructions: {args.calls} sequential calls counted by callgrind (after "
        f"{WARM_UP_CALLS} uncounted), every thread of one `esra serve --config` process: "
        f"PostgreSQL source of {args.rows} documents, state and audit in PostgreSQL, LocalModel"
    )
    note_inherited_pythonpath()
    deployed = counts[0]
    if baseline is not None:
        before = counts[1]
        print(f"baseline {args.baseline}: {before:.2f} M/call; working tree / baseline: ", end="")
        print(f"{deployed / before:.3f}")
    if not args.breakdown:
        print(f"ESRA as deployed: {deployed:.2f} M/call")
        return 0
    without = {
        part: count for (part, _), count in zip(jobs, counts, strict=True) if part is not None
    }
    print_breakdown(deployed, without)
    return 0


if __name__ == "__main__":
    sys.exit(main())
