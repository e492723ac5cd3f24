"""Host instructions per call: ESRA's MCP tool call against the bare route, counted by callgrind.

The CPU figures of ``bench/host_load.py`` move by ±15 % from run to run on a shared virtual
machine, more than most single changes to the host are worth. This bench counts instead of
timing: ``valgrind --tool=callgrind`` counts the instructions a process executes, every thread
included, and the count for the same program, inputs and environment is the same whatever
else the machine is doing. Each server runs under callgrind with instrumentation off while it
starts and warms up (three calls); ``callgrind_control`` then switches it on, ``--calls``
sequential calls are made from this process (not counted), and the counters are dumped.

Two servers, side by side, as in ``bench/host_load.py``: ``esra serve``'s embedded default
(``esra_larkspur``, the SDK's recorded ``tools/call`` request with an ``esra dev-token``
JWT, ``LocalModel``, durable audit with ``wait_for_write``), and a bare Starlette route on
uvicorn running exactly the SQLite statements that call sent (recorded by an in-process host
first, the databases copied) and returning the rows as JSON. Both run on each serving stack
installed: asyncio and h11 always (uvloop and httptools hidden from the process when
present), and uvloop with httptools when the ``speedups`` extra is installed. Printed: million
instructions per call of each server on each stack, ESRA / bare (the issue-19 target is
≤ 5× for CPU per call), and each side's speedups / plain ratio.

``--baseline REV`` also counts ESRA built from revision ``REV``'s packages, on every stack,
in the same run (``bench/_baseline.py``), and prints the working tree's count over the
baseline's: how two versions of the code compare, without a figure from another run.

``--breakdown`` also counts ESRA on asyncio/h11 with one part of its call at a time replaced
by a near-free stand-in that keeps every answer valid (``bench/_call_parts.py``): the
LocalModel's reasoning, the SQLite statements with their thread hops, the audit commits, and
the whole retrieve. A part's cost is the deployed count less the count without it; what the
retrieve costs beyond the three named parts is the pipeline's own work, and what is left
with the retrieve replaced is the host around it (HTTP, the MCP SDK, authentication, tool
lookup, the invoke audit record, serialization).

Needs valgrind (Debian's package; skipped with exit status 0 without it); about a minute on
a quiet two-core machine, ``--breakdown`` included (servers run about 50× slower under
callgrind, two at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import httpx2
import uvicorn

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._baseline import exported, note_inherited_pythonpath, serving_environment
from bench._call_parts import STAND_INS, print_breakdown
from bench.host_load import (
    RECORDED,
    TENANT,
    RecordedCall,
    Statement,
    _bare_app,
    _bare_ok,
    _esra_ok,
    _in_thread,
    _record_statements,
    _warm_up,
)
from esra.starlette._cli import main as cli_main
from esra.starlette._event_loop import run_serving
from esra.starlette._parts import open_embedded
from esra.starlette._serve import HostServer, free_port

WARM_UP_CALLS = 3
START_TIMEOUT_S = 900.0
# Hiding a package from a process: an import of a name mapped to None raises ImportError, so
# the serving loop falls back to asyncio and uvicorn's "auto" HTTP parser to h11.
_PLAIN = "import sys; sys.modules['uvloop'] = None; sys.modules['httptools'] = None; "


@attrs.frozen
class Count:
    """Million instructions per call of one server on one stack (ESRA with a part replaced by
    its stand-in when ``stand_in`` names one; built from the baseline revision when
    ``baseline``)."""

    side: str
    stack: str
    per_call: float
    stand_in: str | None = None
    baseline: bool = False


@attrs.frozen
class Job:
    """One server to count: ESRA or the bare route, on one stack, with a part replaced by its
    stand-in (``stand_in``) or served from another revision's sources (``tree``)."""

    side: str
    stack: str
    stand_in: str | None = None
    tree: Path | None = None


def _speedups_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("uvloop", "httptools"))


def _dev_token(data_dir: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["dev-token", "--tenant", TENANT, "--subject", "bench", "--data-dir", str(data_dir)]
        argv += ["--claim", "region=emea"]  # the support desk's record-level security
        if cli_main(argv) != 0:
            msg = "esra dev-token failed"
            raise RuntimeError(msg)
    return out.getvalue().strip()


def _record_call(data_dir: Path, token: str, databases: Path) -> tuple[RecordedCall, Path]:
    """One call through an in-process host: its ``tools/call`` request and its statements.

    The embedded default rebuilds its demo databases in a temporary directory that goes with
    the host, so the statements' databases are copied to ``databases`` while it serves.
    """
    stop_recording = _record_statements()
    port = free_port()
    host = HostServer(
        lambda: open_embedded(data_dir), host="127.0.0.1", port=port, log_level="warning"
    )
    with _in_thread(host.serve, host.started, host.stop):
        call = asyncio.run(_warm_up(f"http://127.0.0.1:{port}", token))
        stop_recording()
        copied: dict[str, str] = {}
        for database, _, _ in RECORDED:
            if database not in copied:
                target = databases / f"{len(copied)}-{Path(database).name}"
                shutil.copyfile(database, target)
                copied[database] = str(target)
    statements = [(copied[db], sql, params) for db, sql, params in RECORDED]
    path = databases / "statements.json"
    path.write_text(json.dumps(statements), encoding="utf-8")
    return call, path


def _serve_bare(statements_file: Path, port: int) -> None:
    """The bare route as a process of its own (what runs under callgrind for that side)."""
    statements: list[Statement] = [
        (db, sql, dict(params)) for db, sql, params in json.loads(statements_file.read_text())
    ]
    config = uvicorn.Config(
        _bare_app(statements), host="127.0.0.1", port=port, log_level="warning", ws="none"
    )
    run_serving(uvicorn.Server(config).serve)


def _answer(
    client: httpx2.Client, url: str, headers: dict[str, str], body: bytes, check: Any
) -> None:
    response = client.post(url, headers=headers, content=body)
    response.raise_for_status()
    if not check(response.json()):
        msg = f"{url} answered without results: {response.text[:300]}"
        raise RuntimeError(msg)


def _first_answer(
    client: httpx2.Client,
    url: str,
    headers: dict[str, str],
    body: bytes,
    *,
    check: Any,
    process: subprocess.Popen[bytes],
) -> None:
    """The first call, made as soon as the server listens (it starts slowly under callgrind)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            msg = f"the server exited with {process.returncode} before it answered"
            raise RuntimeError(msg)
        try:
            _answer(client, url, headers, body, check)
        except httpx2.TransportError:
            time.sleep(0.5)
        else:
            return
    msg = f"no answer from {url}"
    raise RuntimeError(msg)


@contextlib.contextmanager
def _under_callgrind(
    program: Sequence[str], out: Path, env: dict[str, str]
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``program`` under callgrind, instrumentation off; yield it, then stop it."""
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
    argv += [f"--callgrind-out-file={out}.%p", *program]
    with (out.parent / f"{out.name}.log").open("wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _callgrind_control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)  # noqa: S603, S607


def _dumped_instructions(out: Path, pid: int) -> int:
    """The instruction total of the first dump (the measured calls)."""
    for line in Path(f"{out}.{pid}.1").read_text(encoding="utf-8").splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    msg = f"no summary in {out}.{pid}.1"
    raise RuntimeError(msg)


def _count(
    job: Job,
    call: RecordedCall,
    token: str,
    *,
    data_dir: Path,
    statements: Path,
    work: Path,
    calls: int,
) -> Count:
    side, stack, stand_in = job.side, job.stack, job.stand_in
    port = free_port()
    hide = _PLAIN if stack == "plain" else ""
    arguments: list[str] = []
    if side == "esra":
        install = ""
        if stand_in is not None:
            root = str(Path(__file__).resolve().parents[1])
            install = f"sys.path.insert(0, {root!r}); from bench._call_parts import install; "
            install += f"install({stand_in!r}); "
        code = f"{hide}import sys; {install}from esra.starlette._cli import main; main()"
        arguments = ["serve", "--port", str(port), "--data-dir", str(data_dir)]
        path, headers = "/mcp", {**call[0], "authorization": f"Bearer {token}"}
        body, check = call[1], _esra_ok
    else:
        argv = [__file__, "--serve-bare", str(statements), "--port", str(port)]
        run = "runpy.run_path(sys.argv[0], run_name='__main__')"
        code = f"{hide}import runpy, sys; sys.argv = {argv!r}; {run}"
        path, headers = "/search", {"content-type": "application/json"}
        body, check = b'{"prompt": "bench"}', _bare_ok
    url = f"http://127.0.0.1:{port}{path}"
    version = "baseline" if job.tree is not None else "tree"
    out = work / f"callgrind-{side}-{stack}-{stand_in or 'deployed'}-{version}"
    env = {**serving_environment(job.tree), "ESRA_HOME": str(data_dir)}
    with (
        _under_callgrind([sys.executable, "-c", code, *arguments], out, env) as process,
        httpx2.Client(timeout=600) as client,
    ):
        _first_answer(client, url, headers, body, check=check, process=process)
        for _ in range(WARM_UP_CALLS - 1):
            _answer(client, url, headers, body, check)
        _callgrind_control("-i", "on", str(process.pid))
        for _ in range(calls):
            _answer(client, url, headers, body, check)
        _callgrind_control("-d", str(process.pid))
        instructions = _dumped_instructions(out, process.pid)
    return Count(side, stack, instructions / calls / 1e6, stand_in, baseline=job.tree is not None)


def _report(counts: Sequence[Count], stacks: Sequence[str], *, baseline: str | None) -> None:
    """Print each stack's ESRA and bare counts, ESRA against the baseline revision when one
    was counted, and the breakdown when stand-ins were."""
    note_inherited_pythonpath()
    deployed = [c for c in counts if c.stand_in is None]
    by = {(c.side, c.stack): c.per_call for c in deployed if not c.baseline}
    print(f"{'stack':<34} {'ESRA M/call':>12} {'bare M/call':>12} {'ESRA / bare':>12}")
    names = {"plain": "asyncio, h11", "speedups": "uvloop, httptools (speedups)"}
    for name in stacks:
        esra, bare = by[("esra", name)], by[("bare", name)]
        ratio = f"{esra / bare:.1f}x"
        print(f"{names[name]:<34} {esra:>12.2f} {bare:>12.2f} {ratio:>12}  (target <= 5x)")
    if "speedups" in stacks:
        esra_gain = by[("esra", "speedups")] / by[("esra", "plain")]
        bare_gain = by[("bare", "speedups")] / by[("bare", "plain")]
        print(f"speedups / plain: ESRA {esra_gain:.2f}, bare {bare_gain:.2f}")
    if baseline:
        before = {c.stack: c.per_call for c in deployed if c.baseline}
        print(f"\nESRA against the baseline {baseline}:")
        print(f"{'stack':<34} {'baseline M':>12} {'tree M':>12} {'tree / base':>12}")
        for name in stacks:
            after = by[("esra", name)]
            ratio = f"{after / before[name]:.3f}"
            print(f"{names[name]:<34} {before[name]:>12.2f} {after:>12.2f} {ratio:>12}")
    if any(c.stand_in is not None for c in counts):
        without = {c.stand_in: c.per_call for c in counts if c.stand_in is not None}
        print("\nbreakdown, asyncio/h11:")
        print_breakdown(by[("esra", "plain")], without, bare=by[("bare", "plain")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="counted calls per server")
    parser.add_argument("--quick", action="store_true", help="10 counted calls per server")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also count ESRA built from revision REV's packages and print the working "
        "tree's count over it",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also count ESRA on asyncio/h11 with each part of its call replaced by a "
        "near-free stand-in (bench/_call_parts.py) and print what each part costs",
    )
    parser.add_argument("--serve-bare", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.calls = 10
    if args.serve_bare is not None:
        _serve_bare(args.serve_bare, args.port)
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        # Exit status 0, as the other benches skip: `nox -s bench` runs every script.
        print("host_instructions: needs valgrind (apt-get install valgrind); skipped")
        return
    stacks = ["plain", "speedups"] if _speedups_installed() else ["plain"]
    with (
        contextlib.ExitStack() as stack,
        tempfile.TemporaryDirectory(prefix="esra-bench-instructions-") as tmp,
    ):
        baseline = stack.enter_context(exported(args.baseline)) if args.baseline else None
        jobs = [Job(side, name) for name in stacks for side in ("esra", "bare")]
        if baseline is not None:
            jobs += [Job("esra", name, tree=baseline) for name in stacks]
        if args.breakdown:
            jobs += [Job("esra", "plain", stand_in=part) for part in STAND_INS]
        work = Path(tmp)
        data_dir = work / "data"
        data_dir.mkdir()
        token = _dev_token(data_dir)
        # The baseline serves from a data directory of its own, copied before anything but
        # the development issuer's key is in it: the working tree's state database may be
        # at a schema version the baseline refuses as newer.
        baseline_data = work / "baseline-data"
        shutil.copytree(data_dir, baseline_data)
        call, statements = _record_call(data_dir, token, work)
        n_statements = len(json.loads(statements.read_text(encoding="utf-8")))
        # Two at a time: counts do not depend on what else runs, only the wait does.
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = list(
                pool.map(
                    lambda job: _count(
                        job,
                        call,
                        token,
                        data_dir=baseline_data if job.tree is not None else data_dir,
                        statements=statements,
                        work=work,
                        calls=args.calls,
                    ),
                    jobs,
                )
            )
    print(
        f"host_instructions: {args.calls} sequential calls per server counted by callgrind "
        f"(after {WARM_UP_CALLS} uncounted), every thread of the server process; "
        f"embedded default, {n_statements} SQLite statements per call"
    )
    _report(counts, stacks, baseline=args.baseline)


if __name__ == "__main__":
    main()
