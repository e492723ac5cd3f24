"""Provider overhead: ESRA over PostgreSQL with an instant fake model vs. the same SQL direct.

One source, 100,000 generated documents (deterministic text, seeded once into the schema
``esra_bench_provider_overhead`` and reused while its row count and version match). Every
iteration runs one whole invocation — scope, selection, planning (three queries for the one
source: an OR of keywords, a phrase, a required term), validation, execution through
``PostgresProvider`` (pool, one pipelined transaction: ``set_config`` of read-only, the
statement timeout and the search path, then the statement), aggregation, rerank, response —
and then, side by side, runs the very three statements that invocation executed directly
with psycopg on one plain autocommit connection (never server-side prepared, like ESRA's),
one after the other. The statements are rebuilt from the recorded ``ValidatedQuery`` objects
outside both timed windows. Printed: wall-clock p50 and p95 of both and their ratios
(target: p50 ratio ≤ 1.25).

The DSN comes from ``ESRA_TEST_POSTGRES_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``); an unreachable server is reported and the
script exits 0. Run with ``python3 -m nox -s bench`` or ``python bench/provider_overhead.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import psycopg
from psycopg import sql

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
from esra.core.testing import (
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemorySecretStore,
    StaticHostAllowlist,
)
from esra.postgres import PostgresProvider, create_text_index

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA = "esra_bench_provider_overhead"
DATA_VERSION = "1"  # bump when the generated text changes, so a stale copy is rebuilt
ROWS = 100_000
TENANT = "bench"
SOURCE = "pg"
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe")
# 1,728 three-syllable pseudo-words; each row's text draws from a skewed distribution, so
# some words are common (thousands of rows) and most are rare, like real text.
WORDS = [a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES]
# Mid-frequency words (each in roughly 1-5 % of the rows), as a real question's content
# words would be; the most common words would make every query a scan of most of the table.
QUESTIONS = [
    f"{WORDS[303]} {WORDS[640]} {WORDS[911]} {WORDS[1200]}",
    f"{WORDS[407]} {WORDS[808]} {WORDS[1520]}",
    f"{WORDS[720]} {WORDS[321]} {WORDS[1500]} {WORDS[612]}",
    f"{WORDS[366]} {WORDS[1404]}",
]


def _mapping() -> Mapping:
    return Mapping(
        id="docs",
        tenant_id=TENANT,
        source_id=SOURCE,
        business_name="Documents",
        description="Generated documents.",
        relation="documents",
        text_index="documents_tsv",
        record_key="doc_id",
        title_field="title",
        content_fields=("body",),
        fields=(
            FieldSpec(name="title", column="title", is_searchable=True, is_returnable=True),
            FieldSpec(name="body", column="body", is_searchable=True, is_returnable=True),
        ),
    )


def _rows() -> list[tuple[int, str, str]]:
    rng = random.Random(20261130)
    weights = [1.0 / (rank + 10) for rank in range(len(WORDS))]
    return [
        (
            n,
            " ".join(rng.choices(WORDS, weights, k=6)),
            " ".join(rng.choices(WORDS, weights, k=rng.randint(40, 120))),
        )
        for n in range(ROWS)
    ]


async def _seed(dsn: str) -> None:
    """Create and fill the schema once; reuse it while its row count and version match."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        present = await (
            await conn.execute(
                "SELECT obj_description(to_regnamespace(%s), 'pg_namespace')", (SCHEMA,)
            )
        ).fetchone()
        if present and present[0] == f"rows={ROWS} version={DATA_VERSION}":
            return
        print(f"seeding {ROWS} rows into schema {SCHEMA} (once)...")
        schema = sql.Identifier(SCHEMA)
        await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        table = sql.Identifier(SCHEMA, "documents")
        await conn.execute(
            sql.SQL("CREATE TABLE {} (doc_id integer PRIMARY KEY, title text, body text)").format(
                table
            )
        )
        async with conn.cursor() as cursor:
            copy_sql = sql.SQL("COPY {} (doc_id, title, body) FROM STDIN").format(table)
            async with cursor.copy(copy_sql) as copy:
                for row in _rows():
                    await copy.write_row(row)
        await create_text_index(conn, attrs.evolve(_mapping(), schema=SCHEMA))
        await conn.execute(sql.SQL("ANALYZE {}").format(table))
        await conn.execute(
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                schema, sql.Literal(f"rows={ROWS} version={DATA_VERSION}")
            )
        )


def _snapshot() -> ConfigSnapshot:
    source = Source(
        id=SOURCE,
        tenant_id=TENANT,
        name="Documents",
        description="Generated documents.",
        provider_kind="postgres",
        connection_ref="(bench)",
    )
    capability = Capability(
        id="cap",
        tenant_id=TENANT,
        name="Bench",
        bindings=(SourceBinding(SOURCE, BindingMode.OPTIONAL),),
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
        sources=(source,),
        mappings=(_mapping(),),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _three_queries(prompt: Prompt) -> str:
    """An instant planner: keyword OR, phrase and required-term queries for the mapping."""
    words = prompt.request.split()
    mapping = json.loads(prompt.reference[1].content)["mapping"]
    queries = [
        {"mapping": mapping, "strategy": "keyword", "optional_terms": words},
        {"mapping": mapping, "strategy": "phrase", "phrases": [" ".join(words[:2])]},
        {"mapping": mapping, "strategy": "keyword", "required_terms": words[:1]},
    ]
    return json.dumps({"queries": queries})


class RecordingProvider:
    """Delegates to the PostgreSQL provider and remembers each query it ran."""

    def __init__(self, inner: PostgresProvider) -> None:
        self.inner = inner
        self.queries: list[ValidatedQuery] = []

    @property
    def capabilities(self) -> ProviderCapabilities:
        return self.inner.capabilities

    async def health(self) -> SourceHealth:
        return await self.inner.health()

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.queries.append(query)
        return await self.inner.execute(query, timeout_s=timeout_s)

    def statements(self) -> list[tuple[str, dict[str, object]]]:
        """The statements the recorded queries ran, exactly as the provider built them."""
        return [(b.sql, dict(b.params)) for b in map(self.inner.builder.build, self.queries)]


async def _measure(dsn: str, iterations: int) -> tuple[list[float], list[float], list[float], int]:
    parts = urlsplit(dsn)
    host, port = (parts.hostname or "127.0.0.1").lower(), parts.port or 5432
    provider = RecordingProvider(
        PostgresProvider(
            tenant_id=TENANT,
            connection=dsn,
            secrets=InMemorySecretStore(),
            allowlist=StaticHostAllowlist([(TENANT, host, port)]),
            mappings=(_mapping(),),
            search_path=SCHEMA,
        )
    )
    retriever = Retriever(
        config=StaticConfigRepository([_snapshot()]),
        providers={SOURCE: provider},
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
    direct = await _plain(dsn)
    parallel = [await _plain(dsn) for _ in range(3)]
    pipeline_ms: list[float] = []
    direct_ms: list[float] = []
    parallel_ms: list[float] = []
    rows_seen = 0
    try:
        for iteration in range(iterations + 5):
            provider.queries.clear()
            question = QUESTIONS[iteration % len(QUESTIONS)]
            started = time.perf_counter()
            response = await retriever.retrieve(context, question)
            pipeline_wall = time.perf_counter() - started
            statements = provider.statements()  # outside both timed windows
            started = time.perf_counter()
            for statement, params in statements:
                cursor = await direct.execute(statement, params)
                rows_seen += len(await cursor.fetchall())
            direct_wall = time.perf_counter() - started
            started = time.perf_counter()
            await asyncio.gather(
                *(_run(conn, s, p) for conn, (s, p) in zip(parallel, statements, strict=False))
            )
            parallel_wall = time.perf_counter() - started
            if len(statements) != 3 or response.warnings:
                msg = f"unexpected invocation: {len(statements)} queries, {response.warnings}"
                raise RuntimeError(msg)
            if iteration >= 5:  # the first iterations warm the pool and the server's caches
                pipeline_ms.append(pipeline_wall * 1000)
                direct_ms.append(direct_wall * 1000)
                parallel_ms.append(parallel_wall * 1000)
    finally:
        for conn in (direct, *parallel):
            await conn.close()
        await provider.inner.close()
    return pipeline_ms, direct_ms, parallel_ms, rows_seen


async def _plain(dsn: str) -> psycopg.AsyncConnection[Any]:
    # Never prepared, as ESRA's pools never prepare: psycopg's default prepares a statement
    # after its fifth run and PostgreSQL then plans the full-text statements generically,
    # which made this baseline slower than plain SQL and hid the same cost on ESRA's side.
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True, prepare_threshold=None)
    await conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(SCHEMA)))
    return conn


async def _run(conn: psycopg.AsyncConnection[Any], statement: str, params: Any) -> None:
    cursor = await conn.execute(statement, params)
    await cursor.fetchall()


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _reachable(dsn: str) -> bool:
    try:
        conn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=5)
    except psycopg.Error as exc:
        print(f"provider_overhead: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False
    await conn.close()
    return True


def main() -> None:
    """Seed once if needed, run the side-by-side measurement, print p50/p95 and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="20 iterations")
    args = parser.parse_args()
    if args.quick:
        args.iterations = min(args.iterations, 20)
    dsn = os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip() or DEFAULT_DSN
    if not asyncio.run(_reachable(dsn)):
        return
    asyncio.run(_seed(dsn))
    pipeline, direct, parallel, rows = asyncio.run(_measure(dsn, args.iterations))
    print(
        f"provider_overhead: {ROWS} rows, 1 source, 3 queries per invocation, "
        f"{args.iterations} iterations, {rows / (args.iterations + 5):.0f} rows per iteration"
    )
    print(f"{'':>34} {'p50 ms':>8} {'p95 ms':>8} {'ratio p50':>9} {'ratio p95':>9}")
    e50, e95 = _percentile(pipeline, 0.5), _percentile(pipeline, 0.95)
    print(f"{'ESRA invocation':>34} {e50:>8.2f} {e95:>8.2f}")
    for label, values in (
        ("direct, one connection, in turn", direct),
        ("direct, three connections, at once", parallel),
    ):
        b50, b95 = _percentile(values, 0.5), _percentile(values, 0.95)
        print(f"{label:>34} {b50:>8.2f} {b95:>8.2f} {e50 / b50:>9.2f} {e95 / b95:>9.2f}")
    print(
        f"target: ESRA / direct (one connection) p50 <= 1.25; "
        f"mean ESRA {statistics.mean(pipeline):.2f} ms"
    )


if __name__ == "__main__":
    main()
