"""Ingestion scale-out: one ``esra worker`` process against two, draining one PostgreSQL store.

A tenant's document store of kind ``postgres-document-store`` is named in a settings file, as
``esra serve --config`` reads it: the store's principal is a dedicated login role with CREATE
on the database and nothing else (the store refuses a superuser), its password reaches the
processes as a ``${secret:env:...}`` reference. Each round, for 1 and then 2 workers (the
order alternating between rounds, so drift on a shared machine does not favour one side):

1. the store's schema is dropped and applied again by the store's own role
   (``apply_store_schema``, the step the admin API's initialisation runs), so every run drains
   an identical, fresh queue;
2. ``esra ingest --config ... --tenant ... --no-index DIR`` queues every file of the corpus
   (Pending; not timed);
3. the clock starts and ``esra worker --config ... --until-idle --worker-id ...`` processes
   are started together; each exits when a turn finds nothing left to claim.

Two durations are printed per run: **wall**, from starting the workers until the last has
exited (it includes each process's start-up: imports, the settings, the store's pool), and
**drain**, from the first claim (seen by polling the queue every 20 ms) to the last
document's completion (its ``updated_at``), which is what a long-running worker pool
sustains. Documents per second of each, the 2/1 ratio of each per round and their medians
(the issue's target: ≥ 1.6 on two cores). Beside each run, the cores in use over its wall
time: the whole machine's (``/proc/stat``) and the workers' own, their extraction children
included, so PostgreSQL's share and any other work on the machine show. Each run is then
checked: every document must have been processed exactly once — ended ``indexed`` at
attempt 1, or ``quarantined`` at attempt 1 (the scanner's verdict on its text, the same
whatever the number of workers; such documents are named) — and every run must end with the
same states; anything else (another state, a second attempt, a document missing) is printed
as a discrepancy, and the script exits 1.

Corpus (``--corpus``): ``pdf`` (default), the distinct PDFs under
``$ESRA_SHARED_DATA/documents/pdf`` that pypdf reads, outside the encrypted, malformed and
prompt-injection sets (35 files; one of them, GeoTopo-komprimiert.pdf, 1.8 MB, takes about half of
the corpus's extraction time, which bounds how evenly two workers can share a small queue);
``markdown``, the 18F handbook's 247 Markdown pages (cheap to extract: the queue's and the
index's own cost shows). ``--copies K`` (default 2) queues K byte-distinct copies of each
file (the store refuses a duplicate), ``--limit N`` keeps the first N files. The role and the
schema are dropped at the end, also on failure.
An unreachable server or a missing corpus is reported and the script exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import attrs
import psycopg
from psycopg import sql

from esra.core.config import ConfigSnapshot, dump_snapshot
from esra.postgres import apply_store_schema
from esra.postgres._store_factory import postgres_store_source

# Run as a script (``python bench/ingest_workers.py``, as ``nox -s bench`` does), the project
# root is not on the path; the private helpers live in the ``bench`` package.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._serve_hosts import BenchIssuer

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
TENANT = "bench-ingest"
PASSWORD_VARIABLE = "ESRA_BENCH_STORE_PASSWORD"
# Left out of the PDF corpus: files no worker should index (see the module docstring).
EXCLUDED_PDF_SETS = ("encrypted", "malformed", "prompt_injection_in_pdf")
MARKDOWN_SET = "markdown_policies_18F_handbook"
POLL_S = 0.02
# The states a document processed once may end in (see Run.discrepancy).
FINAL = frozenset({"indexed", "quarantined"})
# Safety nets for a slow machine, never measurements.
INGEST_TIMEOUT_S = 900.0
WORKER_TIMEOUT_S = 1800.0
# The line `esra worker` logs as it stops (esra.starlette._worker.run_worker).
_STOPPED = re.compile(
    r"worker (?P<id>\S+) stopped: indexed (?P<indexed>\d+), quarantined (?P<quarantined>\d+), "
    r"failed (?P<failed>\d+), retried (?P<retried>\d+), lost (?P<lost>\d+)"
)


def _shared_data() -> Path:
    root = os.environ.get("ESRA_SHARED_DATA") or str(
        Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    return Path(root) / "documents"


def _readable_pdf(data: bytes) -> bool:
    from pypdf import PdfReader  # noqa: PLC0415 - only the PDF corpus needs it

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            return False
        return any((page.extract_text() or "").strip() for page in reader.pages)
    except Exception:  # unreadable by pypdf: not part of the corpus
        return False


def _corpus_files(kind: str) -> list[tuple[str, bytes]]:
    """The corpus's distinct files, by name (sorted, so every run queues the same order)."""
    root = _shared_data()
    if kind == "markdown":
        paths = sorted((root / MARKDOWN_SET).rglob("*.md"))
    else:
        paths = sorted(
            path
            for path in (root / "pdf").rglob("*.pdf")
            if not set(path.relative_to(root / "pdf").parts) & set(EXCLUDED_PDF_SETS)
        )
    logging.disable(logging.CRITICAL)  # pypdf warns about every quirk of a sample file
    files: list[tuple[str, bytes]] = []
    seen: set[str] = set()
    for path in paths:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen or not data.strip():
            continue
        if kind == "pdf" and not _readable_pdf(data):
            continue
        seen.add(digest)
        files.append((path.name, data))
    logging.disable(logging.NOTSET)
    return files


def _write_corpus(directory: Path, files: Sequence[tuple[str, bytes]], copies: int) -> int:
    """Write ``copies`` byte-distinct copies of each file; return how many files were written."""
    count = 0
    for number, (name, data) in enumerate(files):
        stem, suffix = os.path.splitext(name)
        for copy in range(copies):
            # A trailing comment: the same document to an extractor, a new one to the store.
            marker = (b"\n%% copy %d\n" if suffix == ".pdf" else b"\n<!-- copy %d -->\n") % copy
            body = data if copy == 0 else data + marker
            (directory / f"{number:04d}-{copy:02d}-{stem}{suffix}").write_bytes(body)
            count += 1
    return count


@attrs.frozen
class StoreRole:
    """The store's principal: a login role with CREATE on the database, not a superuser."""

    name: str
    password: str

    def dsn(self, admin_dsn: str) -> str:
        parts = urlsplit(admin_dsn)
        netloc = f"{self.name}:{self.password}@{parts.hostname or '127.0.0.1'}:{parts.port or 5432}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@contextlib.contextmanager
def _store_role(admin_dsn: str) -> Iterator[StoreRole]:
    role = StoreRole(f"esra_bench_store_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        database = conn.execute("SELECT current_database()").fetchone()
        if database is None:
            msg = "no current database"
            raise RuntimeError(msg)
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role.name), sql.Literal(role.password)
            )
        )
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(str(database[0])), sql.Identifier(role.name)
            )
        )
    try:
        yield role
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            # Everything the role owns (the store's schema) goes with it.
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role.name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role.name)))


def _write_settings(directory: Path, admin_dsn: str, role: StoreRole, schema: str) -> Path:
    """The settings ``esra ingest`` and ``esra worker`` read: one tenant, one PostgreSQL store."""
    parts = urlsplit(admin_dsn)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    database = parts.path.lstrip("/")
    template = (
        f"postgresql://{role.name}:${{secret:env:{PASSWORD_VARIABLE}}}@{host}:{port}/{database}"
    )
    source, mapping = postgres_store_source(TENANT, template, schema=schema)
    snapshot = ConfigSnapshot(
        tenant_id=TENANT, version="bench-1", sources=(source,), mappings=(mapping,)
    )
    issuer = BenchIssuer()
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(snapshot)))
    (directory / "jwks.json").write_text(json.dumps(issuer.jwks()))
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
outbound_hosts = ["{host}:{port}"]

[tenants.secrets]
env_names = ["{PASSWORD_VARIABLE}"]

[tenants.sources.document_store]
schema = "{schema}"
pool_size = 2
"""
    )
    return settings


def _esra(*argv: str) -> list[str]:
    return [sys.executable, "-m", "esra.starlette._cli", *argv]


async def _apply_schema(role_dsn: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(role_dsn, autocommit=True) as conn:
        await apply_store_schema(conn, schema)


def _fresh_queue(
    admin_dsn: str,
    role: StoreRole,
    schema: str,
    *,
    settings: Path,
    corpus: Path,
    env: dict[str, str],
) -> int:
    """Drop and re-apply the store's schema, queue the corpus; return the documents pending."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    asyncio.run(_apply_schema(role.dsn(admin_dsn), schema))
    queued = subprocess.run(  # noqa: S603 - our own interpreter and CLI
        _esra("ingest", "--config", str(settings), "--tenant", TENANT, "--no-index", str(corpus)),
        capture_output=True,
        text=True,
        env=env,
        timeout=INGEST_TIMEOUT_S,
        check=False,
    )
    if queued.returncode != 0:
        msg = f"esra ingest --no-index failed ({queued.returncode}):\n{queued.stderr[-3000:]}"
        raise RuntimeError(msg)
    return sum(_states(admin_dsn, schema).values())


def _states(admin_dsn: str, schema: str) -> dict[tuple[str, int], int]:
    """How many of the tenant's documents are in each (state, attempts)."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT state, attempts, count(*) FROM {} WHERE tenant_id = %s GROUP BY 1, 2"
            ).format(sql.Identifier(schema, "documents")),
            (TENANT,),
        ).fetchall()
    return {(str(state), int(attempts)): int(count) for state, attempts, count in rows}


@attrs.frozen
class Run:
    """One drain of the queue by ``workers`` processes."""

    workers: int
    documents: int
    wall_s: float
    drain_s: float
    # Per worker id, the documents it indexed (from the line it logs as it stops).
    indexed_by: dict[str, int]
    states: dict[tuple[str, int], int]
    # Cores in use over the wall time: the whole machine's, and the workers' own (their
    # extraction children included); the difference is PostgreSQL and whatever else runs.
    machine_cores: float | None
    worker_cores: float

    # The titles of the documents that ended in another state than ``indexed``.
    not_indexed: tuple[str, ...]

    def discrepancy(self) -> str | None:
        """What was not processed exactly once, at its first attempt, or None.

        Exactly once: every queued document ended ``indexed`` — or ``quarantined``, the
        scanner's verdict on its text, which no number of workers changes — at attempt 1.
        """
        done = sum(
            n for (state, attempts), n in self.states.items() if attempts == 1 and state in FINAL
        )
        if done == self.documents == sum(self.states.values()):
            return None
        shown = ", ".join(
            f"{state}@{attempts}: {n}" for (state, attempts), n in sorted(self.states.items())
        )
        return f"expected {self.documents} indexed (or quarantined) at attempt 1, found {shown}"


def _machine_busy() -> tuple[int, int] | None:
    """Busy and total CPU time of the whole machine so far, in ticks (Linux only)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(value) for value in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _drain(admin_dsn: str, schema: str, settings: Path, env: dict[str, str], count: int) -> Run:
    documents = sum(_states(admin_dsn, schema).values())
    claimed = sql.SQL("SELECT 1 FROM {} WHERE attempts > 0 LIMIT 1").format(
        sql.Identifier(schema, "documents")
    )
    names = [f"bench-w{n}" for n in range(count)]
    with psycopg.connect(admin_dsn, autocommit=True) as poll:
        busy_before, cpu_before = _machine_busy(), _children_cpu_s()
        started = time.perf_counter()
        processes = [
            subprocess.Popen(  # noqa: S603 - our own interpreter and CLI
                _esra("worker", "--config", str(settings), "--until-idle", "--worker-id", name),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for name in names
        ]
        first_claim: float | None = None
        while first_claim is None and any(p.poll() is None for p in processes):
            if poll.execute(claimed).fetchone() is not None:
                first_claim = time.time()
            else:
                time.sleep(POLL_S)
        logs = [p.communicate(timeout=WORKER_TIMEOUT_S)[1] for p in processes]
        wall = time.perf_counter() - started
        busy_after, cpu_after = _machine_busy(), _children_cpu_s()
        last = poll.execute(
            sql.SQL("SELECT extract(epoch FROM max(updated_at)) FROM {}").format(
                sql.Identifier(schema, "documents")
            )
        ).fetchone()
    for process, log in zip(processes, logs, strict=True):
        if process.returncode != 0:
            msg = f"esra worker exited {process.returncode}:\n{log[-3000:]}"
            raise RuntimeError(msg)
    indexed_by: dict[str, int] = {}
    for log in logs:
        for match in _STOPPED.finditer(log):
            indexed_by[match["id"]] = int(match["indexed"])
    if first_claim is None or last is None or last[0] is None:
        msg = "no document was ever claimed"
        raise RuntimeError(msg)
    machine: float | None = None
    if busy_before is not None and busy_after is not None:
        busy, total = (
            after - before for after, before in zip(busy_after, busy_before, strict=True)
        )
        machine = busy / total * (os.cpu_count() or 1) if total else None
    return Run(
        workers=count,
        documents=documents,
        wall_s=wall,
        drain_s=max(float(last[0]) - first_claim, 1e-6),
        indexed_by=indexed_by,
        states=_states(admin_dsn, schema),
        not_indexed=_not_indexed(admin_dsn, schema),
        machine_cores=machine,
        worker_cores=(cpu_after - cpu_before) / wall,
    )


def _not_indexed(admin_dsn: str, schema: str) -> tuple[str, ...]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL("SELECT title, state FROM {} WHERE state <> 'indexed' ORDER BY title").format(
                sql.Identifier(schema, "documents")
            )
        ).fetchall()
    return tuple(f"{title} ({state})" for title, state in rows)


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return True
    except psycopg.Error as exc:
        print(f"ingest_workers: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False


def _load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _print_run(run: Run) -> None:
    split = ", ".join(f"{name} {n}" for name, n in sorted(run.indexed_by.items()))
    machine = "?" if run.machine_cores is None else f"{run.machine_cores:.2f}"
    print(
        f"  {run.workers} worker(s): wall {run.wall_s:7.2f} s {run.documents / run.wall_s:7.1f} "
        f"docs/s | drain {run.drain_s:7.2f} s {run.documents / run.drain_s:7.1f} docs/s "
        f"| indexed by {split} | cores busy: machine {machine}, workers {run.worker_cores:.2f}"
    )
    problem = run.discrepancy()
    if problem is not None:
        print(f"    DISCREPANCY: {problem}")
    if run.not_indexed:
        print(f"    not indexed: {', '.join(run.not_indexed)}")


def _arguments() -> argparse.Namespace:
    """The command line, with ``--quick`` applied."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip() or DEFAULT_DSN,
        help="an administrative DSN (creates and drops the store's role; default: "
        "$ESRA_TEST_POSTGRES_DSN or the local test database)",
    )
    parser.add_argument("--corpus", choices=("pdf", "markdown"), default="pdf")
    parser.add_argument("--copies", type=int, default=2, help="byte-distinct copies of each file")
    parser.add_argument("--limit", type=int, default=0, help="keep the first N files (0: all)")
    parser.add_argument("--rounds", type=int, default=2, help="1-worker/2-worker pairs")
    parser.add_argument("--quick", action="store_true", help="one round over 16 files")
    args = parser.parse_args()
    if args.quick:
        args.limit, args.rounds = 16, 1
    return args


def main() -> int:
    """Queue the corpus afresh for each run; drain it with 1 and 2 workers, alternating."""
    args = _arguments()
    files = _corpus_files(args.corpus)
    if args.limit > 0:
        files = files[: args.limit]
    if not files:
        print(f"ingest_workers: no {args.corpus} corpus under {_shared_data()}; skipped")
        return 0
    if not _reachable(args.dsn):
        return 0
    load = _load_average()
    schema = f"esra_bench_workers_{uuid.uuid4().hex[:10]}"
    runs: list[tuple[Run, Run]] = []
    with (
        tempfile.TemporaryDirectory(prefix="esra-bench-workers-") as tmp,
        _store_role(args.dsn) as role,
    ):
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        written = _write_corpus(corpus, files, max(1, args.copies))
        size_mb = sum(p.stat().st_size for p in corpus.iterdir()) / 1e6
        settings = _write_settings(Path(tmp), args.dsn, role, schema)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", PASSWORD_VARIABLE: role.password}
        print(
            f"ingest_workers: {written} {args.corpus} files ({size_mb:.1f} MB; {len(files)} "
            f"distinct x {max(1, args.copies)}), `esra worker --until-idle` processes on one "
            f"PostgreSQL store; {os.cpu_count()} CPUs, load average at start {load}"
        )
        for number in range(max(1, args.rounds)):
            order = (1, 2) if number % 2 == 0 else (2, 1)
            print(f"round {number + 1} ({order[0]} first):")
            by_count: dict[int, Run] = {}
            for count in order:
                queued = _fresh_queue(
                    args.dsn, role, schema, settings=settings, corpus=corpus, env=env
                )
                if queued != written:
                    print(f"    DISCREPANCY: {written} files written, {queued} queued")
                by_count[count] = _drain(args.dsn, schema, settings, env, count)
                _print_run(by_count[count])
            runs.append((by_count[1], by_count[2]))
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        shutil.rmtree(corpus, ignore_errors=True)
    wall = [two.documents / two.wall_s / (one.documents / one.wall_s) for one, two in runs]
    drain = [two.documents / two.drain_s / (one.documents / one.drain_s) for one, two in runs]
    print(
        f"2 workers / 1 worker, drain: {statistics.median(drain):.2f} "
        f"(rounds: {', '.join(f'{r:.2f}' for r in drain)}; target >= 1.6)"
    )
    print(
        f"2 workers / 1 worker, wall:  {statistics.median(wall):.2f} "
        f"(rounds: {', '.join(f'{r:.2f}' for r in wall)}; start-up included)"
    )
    print(f"load average at end: {_load_average()}")
    every = [run for pair in runs for run in pair]
    if any(run.states != every[0].states for run in every):
        print("DISCREPANCY: the runs' documents ended in different states (shown per run above)")
        return 1
    bad = [run for run in every if run.discrepancy() is not None]
    if not bad:
        tally = ", ".join(f"{state} {n}" for (state, _), n in sorted(every[0].states.items()))
        print(
            f"every run: each of the {every[0].documents} documents processed exactly once, at "
            f"attempt 1 ({tally})"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
