"""Pipeline overhead: ESRA over SQLite with an instant fake model vs. the same SQL run directly.

For 1, 3 and 6 sources (three queries each), every iteration runs one whole invocation —
scope, selection, planning, validation, bounded execution, aggregation, rerank, response —
then, side by side, executes the very statements that invocation sent to SQLite directly
with ``sqlite3`` on the same read-only connections. Printed per source count: wall-clock p50
and p95 of both and their ratio; CPU milliseconds per executed query spent outside the
database — everything ESRA does on the event-loop thread (all stages, prompt building, the
provider's statement building and row mapping), divided by the queries executed; and the
CPU the statements themselves took on the provider's worker threads versus directly.

Run with ``python3 -m nox -s bench`` (or ``python bench/pipeline_overhead.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import attrs

from esra.core._context import CallerIdentity, InvocationContext
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    CapabilityLimits,
    ConfigSnapshot,
    Exposure,
    FieldSpec,
    Mapping,
    Source,
    SourceBinding,
    SourceHealth,
)
from esra.core.ports import ProviderCapabilities
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import FakeLanguageModel, InMemoryAuditSink
from esra.sqlite import SqliteFts5Provider, create_fts5_index, open_readonly

ROWS_PER_SOURCE = 5_000
WORDS = [f"w{i:03d}" for i in range(600)]
TENANT = "bench"
QUESTIONS = ["w001 w017 w042 w250", "w003 w099 w310", "w120 w121 w500 w007", "w066 w404"]


@attrs.frozen
class Sample:
    """One iteration: wall and CPU seconds of the pipeline and of the direct execution.

    ``loop_cpu`` is the event-loop thread's CPU (ESRA outside the database); ``worker_cpu``
    is the rest of the process's CPU during the invocation (SQLite on the worker threads).
    """

    pipeline_wall: float
    loop_cpu: float
    worker_cpu: float
    direct_wall: float
    direct_cpu: float
    queries: int


def _mapping(source_id: str) -> Mapping:
    return Mapping(
        id=f"docs_{source_id}",
        tenant_id=TENANT,
        source_id=source_id,
        business_name="Documents",
        description="Generated documents.",
        relation="documents",
        text_index="documents_fts",
        record_key="doc_id",
        title_field="title",
        content_fields=("body",),
        fields=(
            FieldSpec(name="title", column="title", is_searchable=True, is_returnable=True),
            FieldSpec(name="body", column="body", is_searchable=True, is_returnable=True),
        ),
    )


def _build_database(path: Path, mapping: Mapping, seed: int) -> None:
    rng = random.Random(seed)
    rows = [
        (
            n,
            " ".join(rng.choices(WORDS, k=6)),
            " ".join(rng.choices(WORDS, k=rng.randint(40, 120))),
        )
        for n in range(ROWS_PER_SOURCE)
    ]
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE documents (doc_id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
        conn.executemany("INSERT INTO documents VALUES (?, ?, ?)", rows)
        create_fts5_index(conn, mapping)
        conn.commit()


def _snapshot(source_ids: Sequence[str]) -> ConfigSnapshot:
    sources = tuple(
        Source(
            id=sid,
            tenant_id=TENANT,
            name=f"Source {sid}",
            description="Generated documents.",
            provider_kind="sqlite",
            connection_ref=f"{sid}.db",
        )
        for sid in source_ids
    )
    capability = Capability(
        id="cap",
        tenant_id=TENANT,
        name="Bench",
        bindings=tuple(SourceBinding(s.id, BindingMode.OPTIONAL) for s in sources),
        limits=CapabilityLimits(max_rerank_candidates=40),
    )
    exposure = Exposure(
        id="exp",
        tenant_id=TENANT,
        slug="bench",
        capability_id="cap",
        audience=frozenset({"bench"}),
        published=True,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="1",
        sources=sources,
        mappings=tuple(_mapping(s.id) for s in sources),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _three_queries(prompt: Prompt) -> str:
    """An instant planner: keyword, phrase and required-term queries per mapping."""
    words = prompt.request.split()
    mapping = json.loads(prompt.reference[1].content)["mapping"]
    queries = [
        {"mapping": mapping, "strategy": "keyword", "optional_terms": words},
        {"mapping": mapping, "strategy": "phrase", "phrases": words[:2]},
        {"mapping": mapping, "strategy": "keyword", "required_terms": words[:1]},
    ]
    return json.dumps({"queries": queries})


class RecordingProvider:
    """Delegates to the SQLite provider and remembers each query it ran (built afterwards)."""

    def __init__(self, inner: SqliteFts5Provider, database: Path) -> None:
        self.inner = inner
        self.database = database
        self.queries: list[ValidatedQuery] = []

    @property
    def capabilities(self) -> ProviderCapabilities:
        return self.inner.capabilities

    async def health(self) -> SourceHealth:
        return await self.inner.health()

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.queries.append(query)
        return await self.inner.execute(query, timeout_s=timeout_s)

    def statements(self) -> list[tuple[Path, str, dict[str, object]]]:
        """The statements the recorded queries ran, exactly as the provider built them."""
        built = [self.inner.builder.build(q) for q in self.queries]
        return [(self.database, b.sql, dict(b.params)) for b in built]


def _run_direct(
    statements: Sequence[tuple[Path, str, dict[str, object]]],
    connections: dict[Path, sqlite3.Connection],
) -> None:
    for database, sql, params in statements:
        connections[database].execute(sql, params).fetchall()


async def _measure(directory: Path, source_count: int, iterations: int) -> list[Sample]:
    source_ids = [f"s{n}" for n in range(source_count)]
    snapshot = _snapshot(source_ids)
    providers: dict[str, RecordingProvider] = {}
    for n, sid in enumerate(source_ids):
        path = directory / f"{sid}.db"
        if not path.exists():
            _build_database(path, snapshot.mappings_of(sid)[0], seed=n)
        providers[sid] = RecordingProvider(SqliteFts5Provider(path), path)
    connections = {p.database: open_readonly(p.database) for p in providers.values()}
    retriever = Retriever(
        config=StaticConfigRepository([snapshot]),
        providers=providers,
        model=FakeLanguageModel({PromptTask.PLAN_SEARCHES: _three_queries}),
        audit=InMemoryAuditSink(),
    )
    context = InvocationContext(
        tenant_id=TENANT,
        client_app_id="bench",
        caller=CallerIdentity(subject="bench"),
        exposure_slug="bench",
        correlation_id="bench",
    )
    samples = []
    for iteration in range(iterations + 5):
        for provider in providers.values():
            provider.queries.clear()
        question = QUESTIONS[iteration % len(QUESTIONS)]
        wall, cpu, loop = time.perf_counter(), time.process_time(), time.thread_time()
        await retriever.retrieve(context, question)
        pipeline_wall = time.perf_counter() - wall
        loop_cpu = time.thread_time() - loop
        worker_cpu = time.process_time() - cpu - loop_cpu
        statements = [s for p in providers.values() for s in p.statements()]
        wall, cpu = time.perf_counter(), time.process_time()
        _run_direct(statements, connections)
        direct_wall, direct_cpu = time.perf_counter() - wall, time.process_time() - cpu
        if iteration >= 5:  # the first iterations warm caches and pools
            samples.append(
                Sample(
                    pipeline_wall, loop_cpu, worker_cpu, direct_wall, direct_cpu, len(statements)
                )
            )
    for conn in connections.values():
        conn.close()
    for provider in providers.values():
        provider.inner.close()
    return samples


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(source_count: int, samples: Sequence[Sample]) -> dict[str, float]:
    pipeline = [s.pipeline_wall * 1000 for s in samples]
    direct = [s.direct_wall * 1000 for s in samples]
    outside = [s.loop_cpu * 1000 / max(s.queries, 1) for s in samples]
    database_ratio = [s.worker_cpu / max(s.direct_cpu, 1e-9) for s in samples]
    return {
        "sources": source_count,
        "queries": statistics.median(s.queries for s in samples),
        "pipeline_p50_ms": _percentile(pipeline, 0.5),
        "pipeline_p95_ms": _percentile(pipeline, 0.95),
        "direct_p50_ms": _percentile(direct, 0.5),
        "direct_p95_ms": _percentile(direct, 0.95),
        "ratio_p50": _percentile(pipeline, 0.5) / max(_percentile(direct, 0.5), 1e-9),
        "ratio_p95": _percentile(pipeline, 0.95) / max(_percentile(direct, 0.95), 1e-9),
        "cpu_ms_per_query_outside_db_p50": _percentile(outside, 0.5),
        "cpu_ms_per_query_outside_db_p95": _percentile(outside, 0.95),
        "database_cpu_ratio_p50": _percentile(database_ratio, 0.5),
    }


def main() -> None:
    """Run the benchmark and print one line per source count."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--quick", action="store_true", help="30 iterations")
    args = parser.parse_args()
    if args.quick:
        args.iterations = min(args.iterations, 30)
    print(
        f"pipeline_overhead: {ROWS_PER_SOURCE} rows per source, 3 queries per source, "
        f"{args.iterations} iterations"
    )
    print(
        f"{'sources':>7} {'queries':>7} {'pipeline p50/p95 ms':>20} {'direct p50/p95 ms':>18} "
        f"{'ratio p50':>9} {'CPU ms/query outside DB p50/p95':>32} {'DB CPU vs direct':>17}"
    )
    reports = []
    with tempfile.TemporaryDirectory(prefix="esra-bench-") as tmp:
        for count in (1, 3, 6):
            report = _report(count, asyncio.run(_measure(Path(tmp), count, args.iterations)))
            reports.append(report)
            print(
                f"{count:>7} {report['queries']:>7.0f} "
                f"{report['pipeline_p50_ms']:>9.2f}/{report['pipeline_p95_ms']:<10.2f}"
                f"{report['direct_p50_ms']:>8.2f}/{report['direct_p95_ms']:<9.2f}"
                f"{report['ratio_p50']:>9.2f} "
                f"{report['cpu_ms_per_query_outside_db_p50']:>20.3f}/"
                f"{report['cpu_ms_per_query_outside_db_p95']:<11.3f}"
                f"{report['database_cpu_ratio_p50']:>17.2f}"
            )
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "pipeline_overhead.json").write_text(json.dumps(reports, indent=2))


if __name__ == "__main__":
    main()
