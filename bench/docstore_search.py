"""Document-store search latency over ``searchable_segments``, at 100,000 and 1,000,000 segments.

Each size lives in its own store schema (``esra_bench_docstore_100k`` / ``_1m``), created
with ``apply_store_schema`` (``english``) and seeded once with ``INSERT … SELECT
generate_series`` (the GIN index is rebuilt after the bulk insert); a seeded schema is
reused while its row count and seed version match. The data: 10 segments per document, 10
tenants, 4 scopes, 2 % of documents quarantined and 1 % soft-deleted (both excluded by the
view); each segment is 50 words drawn from a 20,000-word vocabulary with a Zipf-like
distribution (word of rank r with probability ∝ 1/r).

Every search is a real ``PostgresProvider.execute`` (pool, one pipelined transaction made
read-only and given its statement timeout, then the built statement) of a keyword query: two
optional terms ORed, ranked with BM25 in the statement, the tenant bound by equality and the
caller's scopes (two of the four) by ``IN``, 10 rows. Query words are drawn uniformly from
vocabulary ranks 100-20,000: the 100 most frequent words stand for stop words, which the
``english`` configuration drops from real queries. Printed: p50 and p99 per size (target:
p50 ≤ 20 ms at 1,000,000).

The DSN comes from ``ESRA_TEST_POSTGRES_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``); an unreachable server is reported and the
script exits 0. ``--sizes 100000`` runs one size only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

# Run as a script (``python bench/<name>.py``, as ``nox -s bench`` does), the project root is
# not on the path; the private helpers live in the ``bench`` package.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._store_search import (
    QUERIES,
    SEGMENTS_PER_DOCUMENT,
    TENANT,
    VOCABULARY,
    WARMUP,
    WORDS_PER_SEGMENT,
    caller_filters,
    keyword_query,
    percentile,
)
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ProjectedField
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.postgres import PostgresProvider, apply_store_schema, store_mapping

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SEED_VERSION = "esra bench docstore_search seed v1"


def _schema(size: int) -> str:
    return f"esra_bench_docstore_{size // 1000}k" if size < 1_000_000 else "esra_bench_docstore_1m"


def _seeded(conn: psycopg.Connection[tuple[object, ...]], schema: str, size: int) -> bool:
    row = conn.execute(
        "SELECT obj_description(to_regnamespace(%s), 'pg_namespace')", (schema,)
    ).fetchone()
    return bool(row and row[0] == f"{SEED_VERSION} {size}")


async def _seed(dsn: str, size: int) -> float:
    """Create and fill the schema for ``size`` segments unless it already is; return seconds."""
    schema = _schema(size)
    with psycopg.connect(dsn, autocommit=True) as conn:
        if _seeded(conn, schema, size):
            return 0.0
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    started = time.perf_counter()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
        await apply_store_schema(aconn, schema, "english")
    documents = size // SEGMENTS_PER_DOCUMENT
    ident = {
        "d": sql.Identifier(schema, "documents"),
        "s": sql.Identifier(schema, "segments"),
        "gin": sql.Identifier(schema, "segments_tsv_gin"),
    }
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(sql.SQL("DROP INDEX {gin}").format(**ident))
        conn.execute(
            sql.SQL(
                "INSERT INTO {d} (id, tenant_id, title, format, sha256, size, scope, state,"
                " attempts, revision, segment_count, created_at, updated_at, deleted_at)"
                " SELECT 'd' || g, 't' || (g %% 10), 'Document ' || g, 'txt', md5(g::text), 1000,"
                " 's' || (g %% 4), CASE WHEN g %% 50 = 0 THEN 'quarantined' ELSE 'indexed' END,"
                " 1, 1, %(per)s, now(), now(), CASE WHEN g %% 100 = 7 THEN now() END"
                " FROM generate_series(1, %(docs)s) AS g"
            ).format(**ident),
            {"docs": documents, "per": SEGMENTS_PER_DOCUMENT},
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {s} (document_id, tenant_id, ordinal, label, title, body, indexed)"
                " SELECT 'd' || d, 't' || (d %% 10), o, 'part ' || o, 'Document ' || d, w.t, w.t"
                " FROM generate_series(1, %(docs)s) AS d, generate_series(0, %(last)s) AS o,"
                " LATERAL (SELECT string_agg('w' || floor(exp(random() * ln(%(vocab)s)))::int,"
                " ' ') AS t FROM generate_series(1, %(words)s + 0 * d * o)) AS w"
            ).format(**ident),
            {
                "docs": documents,
                "last": SEGMENTS_PER_DOCUMENT - 1,
                "vocab": VOCABULARY,
                "words": WORDS_PER_SEGMENT,
            },
        )
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {s} USING gin (tsv)").format(
                sql.Identifier("segments_tsv_gin"), **ident
            )
        )
        conn.execute(sql.SQL("VACUUM ANALYZE {d}").format(**ident))
        conn.execute(sql.SQL("VACUUM ANALYZE {s}").format(**ident))
        conn.execute(
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(schema), sql.Literal(f"{SEED_VERSION} {size}")
            )
        )
    return time.perf_counter() - started


def _query(schema: str, terms: Sequence[str], n: int) -> ValidatedQuery:
    return keyword_query(
        store_mapping(TENANT, schema=schema),
        terms,
        n,
        record_filters=caller_filters(),
        projection=(
            ProjectedField("title", "title"),
            ProjectedField("content", "body"),
            ProjectedField("section", "label"),
            ProjectedField("document", "document_id"),
        ),
    )


async def _measure(dsn: str, size: int) -> tuple[list[float], float]:
    schema = _schema(size)
    parts = urlsplit(dsn)
    provider = PostgresProvider(
        tenant_id=TENANT,
        connection=dsn,
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(TENANT, parts.hostname or "", parts.port or 5432)]),
        mappings=(store_mapping(TENANT, schema=schema),),
        text_search_config="english",
        search_path=schema,
        pool_size=1,
    )
    rng = random.Random(4)
    timings: list[float] = []
    rows = 0
    try:
        for n in range(WARMUP + QUERIES):
            terms = [f"w{rng.randint(100, VOCABULARY - 1)}" for _ in range(2)]
            query = _query(schema, terms, n)
            started = time.perf_counter()
            result = await provider.execute(query, timeout_s=10.0)
            elapsed = (time.perf_counter() - started) * 1000
            if n >= WARMUP:
                timings.append(elapsed)
                rows += len(result)
    finally:
        await provider.close()
    return timings, rows / QUERIES


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return True
    except psycopg.Error as exc:
        print(f"docstore_search: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False


def main() -> None:
    """Seed each size once, then print search p50/p99 per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--quick", action="store_true", help="the smallest size only")
    args = parser.parse_args()
    if args.quick:
        args.sizes = [min(args.sizes)]
    dsn = os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip() or DEFAULT_DSN
    if not _reachable(dsn):
        return
    print(
        f"docstore_search: keyword queries of 2 ORed terms, tenant + 2 of 4 scopes, 10 rows, "
        f"{QUERIES} queries after {WARMUP} warm-up, through PostgresProvider.execute"
    )
    print(f"{'segments':>10} {'seed s':>8} {'p50 ms':>8} {'p99 ms':>8} {'rows/query':>10}")
    for size in args.sizes:
        seed_s = asyncio.run(_seed(dsn, size))
        timings, rows = asyncio.run(_measure(dsn, size))
        p50, p99 = percentile(timings, 0.5), percentile(timings, 0.99)
        seeded = f"{seed_s:.0f}" if seed_s else "reused"
        print(f"{size:>10,} {seeded:>8} {p50:>8.2f} {p99:>8.2f} {rows:>10.1f}")
    print("target: p50 <= 20 ms at 1,000,000 segments")


if __name__ == "__main__":
    main()
