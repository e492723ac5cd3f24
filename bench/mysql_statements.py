"""esra-mysql's time per search statement, and the working tree's over a baseline revision's.

Each collection of the ranking benchmark (``../shared/data/ir``: Cranfield, MED, CACM, ADI,
TIME) is loaded into a private MariaDB / MySQL database as ``bench/retrieval_quality.py``
loads it (``bench/_ir_engines.py``), and every judged question's engine query — each content
word an optional term, 100 rows (``retrieval_quality._engine_query``) — is executed through
``MySqlProvider`` (pool of 2): one warm-up pass over the questions, then ``--passes`` timed
passes. Timed per statement is the provider's whole path, wall clock around ``execute``:
statement build, pool, the hop to the slot's thread, the server's work and the rows read
back. Printed per collection: statements, p50 and p95 milliseconds, and the process's CPU
milliseconds per statement (user + system, its share of the round trips included).

``--baseline REV`` runs the same measurement on revision ``REV``'s packages (``bench/
_baseline.py``) in its own process, and the working tree's in another, ``--runs`` times each,
alternating (the baseline first in odd runs): the medians of both and the working tree's
over the baseline's are printed per collection. The machine drifts between runs more than
within one, so only ratios from one invocation are comparable.

The DSN comes from ``ESRA_TEST_MYSQL_DSN`` (default ``mysql://root@127.0.0.1:3306/test``);
an unreachable server is reported and the script exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._baseline import exported, note_inherited_pythonpath, serving_environment
from bench._ir_collections import Collection
from bench._ir_engines import mariadb_engine, mariadb_reachable
from bench.retrieval_quality import _collections, _engine_query

DEFAULT_DSN = "mysql://root@127.0.0.1:3306/test"
_PROGRAM = Path(__file__).resolve()


async def _timings(dsn: str, collection: Collection, passes: int) -> dict[str, Any]:
    """Per-statement milliseconds over ``passes`` timed passes, and CPU per statement."""
    async with mariadb_engine(dsn)(collection) as engine:
        queries = [
            _engine_query(engine, query.text, n) for n, query in enumerate(collection.queries)
        ]
        queries = [q for q in queries if q.optional_terms]
        for query in queries:  # warm-up: connections, the server's caches, statements
            await engine.provider.execute(query, timeout_s=30.0)
        elapsed: list[float] = []
        cpu_start = time.process_time()
        for _ in range(passes):
            for query in queries:
                started = time.perf_counter()
                await engine.provider.execute(query, timeout_s=30.0)
                elapsed.append((time.perf_counter() - started) * 1000)
        cpu_ms = (time.process_time() - cpu_start) * 1000
    return {"ms": elapsed, "cpu_ms_per_statement": cpu_ms / max(1, len(elapsed))}


def _measure(dsn: str, passes: int) -> dict[str, Any]:
    return {
        collection.name: asyncio.run(_timings(dsn, collection, passes))
        for collection in _collections([])
    }


def _summary(run: dict[str, Any]) -> dict[str, float]:
    ms = sorted(run["ms"])
    return {
        "statements": len(ms),
        "p50": statistics.median(ms),
        "p95": ms[min(len(ms) - 1, int(0.95 * len(ms)))],
        "cpu": run["cpu_ms_per_statement"],
    }


def _print_single(results: dict[str, Any]) -> None:
    print(f"{'collection':<12}{'statements':>11}{'p50 ms':>9}{'p95 ms':>9}{'CPU ms':>9}")
    for name, run in results.items():
        s = _summary(run)
        print(f"{name:<12}{s['statements']:>11.0f}{s['p50']:>9.2f}{s['p95']:>9.2f}{s['cpu']:>9.2f}")


def _side(tree: Path | None, dsn: str, passes: int) -> dict[str, Any]:
    """One measurement in its own process, serving ``tree``'s packages (the working tree's
    when ``None``)."""
    answer = subprocess.run(  # noqa: S603 - this interpreter and this script
        [sys.executable, str(_PROGRAM), "--emit-json", "--passes", str(passes), "--dsn", dsn],
        env=serving_environment(tree),
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(answer.stdout.strip().splitlines()[-1])
    return result


def _compare(revision: str, dsn: str, passes: int, runs: int) -> None:
    note_inherited_pythonpath()
    sides: dict[str, list[dict[str, Any]]] = {"baseline": [], "tree": []}
    with exported(revision) as baseline:
        for run in range(runs):
            order: list[tuple[str, Path | None]] = [("baseline", baseline), ("tree", None)]
            for name, served in order if run % 2 == 0 else reversed(order):
                sides[name].append(_side(served, dsn, passes))
                print(f"run {run + 1}/{runs}: {name} measured", flush=True)
    print(
        f"{'collection':<12}{'p50 base':>10}{'p50 tree':>10}{'ratio':>7}"
        f"{'CPU base':>10}{'CPU tree':>10}{'ratio':>7}"
    )
    for name in sides["tree"][0]:
        base = [_summary(r[name]) for r in sides["baseline"]]
        ours = [_summary(r[name]) for r in sides["tree"]]
        p50b, p50t = (statistics.median(s["p50"] for s in side) for side in (base, ours))
        cpub, cput = (statistics.median(s["cpu"] for s in side) for side in (base, ours))
        print(
            f"{name:<12}{p50b:>10.2f}{p50t:>10.2f}{p50t / p50b:>7.2f}"
            f"{cpub:>10.2f}{cput:>10.2f}{cput / cpub:>7.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=os.environ.get("ESRA_TEST_MYSQL_DSN", DEFAULT_DSN))
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the questions")
    parser.add_argument("--baseline", metavar="REV", help="also measure revision REV, in turn")
    parser.add_argument("--runs", type=int, default=2, help="runs of each side with --baseline")
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not mariadb_reachable(args.dsn):
        return
    if args.emit_json:
        print(json.dumps(_measure(args.dsn, args.passes)))
    elif args.baseline:
        _compare(args.baseline, args.dsn, args.passes, args.runs)
    else:
        _print_single(_measure(args.dsn, args.passes))


if __name__ == "__main__":
    main()
