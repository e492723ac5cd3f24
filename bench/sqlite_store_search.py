"""Document-store search latency on SQLite (FTS5) at 100,000 segments, caller-scored vs. bm25().

The store file (``sqlite_store_<size>.sqlite3`` in ``--data-dir``, the system's temporary
directory by default) is made with ``SqliteDocumentRepository.initialize`` and seeded once
with the shape ``bench/docstore_search.py`` gives PostgreSQL: 10 segments per document, 10
tenants, 4 scopes, 2 % of documents quarantined and 1 % soft-deleted (both excluded by the
view), each segment 50 words drawn from a 20,000-word vocabulary with a Zipf-like
distribution; a seeded file is reused while its seed version and size match.

Every search is a real ``SqliteFts5Provider.execute`` of a keyword query of two ORed terms
drawn from vocabulary ranks 100-20,000, 10 rows, run two ways side by side, alternating:

- *caller-scored*, as the store searches: the tenant bound by equality and two of the four
  scopes by ``IN``, so each term's ``bm25()`` is reweighed by the idf of the rows the caller
  may see (``esra.sqlite._fulltext``);
- *bm25()*, the baseline: the same terms with no record conditions, scored by FTS5's
  ``bm25()`` over the whole index (what every store search cost before the reweighing).

Printed: p50 and p99 of both and the ratio of their p50s.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

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
from esra.core._config.mapping import Mapping
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ProjectedField
from esra.sqlite import SqliteDocumentRepository, SqliteFts5Provider, store_source

SEED_VERSION = "esra bench sqlite_store_search seed v1"


def _seeded(path: Path, size: int) -> bool:
    if not path.is_file():
        return False
    try:
        with sqlite3.connect(path) as connection:
            row = connection.execute("SELECT seed FROM bench_seed").fetchone()
    except sqlite3.Error:
        return False
    return bool(row and row[0] == f"{SEED_VERSION} {size}")


def _words(rng: random.Random) -> str:
    # Rank r with probability ∝ 1/r: exp(uniform · ln V) is log-uniform over 1..V.
    return " ".join(f"w{int(pow(VOCABULARY, rng.random()))}" for _ in range(WORDS_PER_SEGMENT))


async def _seed(path: Path, size: int) -> float:
    """Create and fill the store file for ``size`` segments unless it already is."""
    if _seeded(path, size):
        return 0.0
    path.unlink(missing_ok=True)
    started = time.perf_counter()
    repository = SqliteDocumentRepository(path)
    await repository.initialize()
    await repository.close()
    rng = random.Random(7)
    documents = size // SEGMENTS_PER_DOCUMENT
    now = "2026-12-06T00:00:00+00:00"
    with sqlite3.connect(path) as connection:
        connection.executemany(
            "INSERT INTO store_documents (id, tenant_id, title, format, sha256, size, scope,"
            " state, segment_count, created_at, updated_at, deleted) VALUES"
            " (?, ?, ?, 'txt', ?, 1000, ?, ?, ?, ?, ?, ?)",
            (
                (
                    f"d{d}",
                    f"t{d % 10}",
                    f"Document {d}",
                    f"{d:064x}",
                    f"s{d % 4}",
                    "quarantined" if d % 50 == 0 else "indexed",
                    SEGMENTS_PER_DOCUMENT,
                    now,
                    now,
                    int(d % 100 == 7),
                )
                for d in range(1, documents + 1)
            ),
        )
        connection.executemany(
            "INSERT INTO store_segments (document_id, ordinal, label, body, indexed_text)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                (f"d{d}", o, f"part {o}", text, text)
                for d in range(1, documents + 1)
                for o in range(SEGMENTS_PER_DOCUMENT)
                for text in (_words(rng),)
            ),
        )
        connection.execute("CREATE TABLE bench_seed (seed TEXT NOT NULL)")
        connection.execute("INSERT INTO bench_seed VALUES (?)", (f"{SEED_VERSION} {size}",))
        connection.execute("ANALYZE")
    connection.close()
    return time.perf_counter() - started


def _query(mapping: Mapping, terms: Sequence[str], n: int, *, caller: bool) -> ValidatedQuery:
    return keyword_query(
        mapping,
        terms,
        n,
        record_filters=caller_filters() if caller else (),
        projection=(
            ProjectedField("title", "title"),
            ProjectedField("content", "body"),
            ProjectedField("document", "document_id"),
        ),
    )


async def _measure(path: Path) -> dict[bool, list[float]]:
    """Each query both ways, alternating which runs first; milliseconds per way."""
    _, mapping = store_source(TENANT)
    provider = SqliteFts5Provider(path, mappings=(mapping,))
    rng = random.Random(4)
    timings: dict[bool, list[float]] = {True: [], False: []}
    try:
        for n in range(WARMUP + QUERIES):
            terms = [f"w{rng.randint(100, VOCABULARY - 1)}" for _ in range(2)]
            for caller in (True, False) if n % 2 else (False, True):
                query = _query(mapping, terms, n, caller=caller)
                started = time.perf_counter()
                await provider.execute(query, timeout_s=10.0)
                if n >= WARMUP:
                    timings[caller].append((time.perf_counter() - started) * 1000)
    finally:
        provider.close()
    return timings


def main() -> None:
    """Seed once, then print both ways' p50/p99 and the ratio of their p50s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10,000 segments")
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    size = 10_000 if args.quick else args.size
    path = args.data_dir / f"sqlite_store_{size}.sqlite3"
    seed_s = asyncio.run(_seed(path, size))
    timings = asyncio.run(_measure(path))
    seeded = f"seeded in {seed_s:.0f} s" if seed_s else "reused"
    print(
        f"sqlite_store_search: {size:,} segments ({seeded}), keyword queries of 2 ORed terms,"
        f" 10 rows, {QUERIES} queries after {WARMUP} warm-up"
    )
    print(f"{'scoring':>26} {'p50 ms':>8} {'p99 ms':>8}")
    for caller, label in ((False, "bm25() (baseline)"), (True, "caller-scored (tenant+scopes)")):
        values = timings[caller]
        print(f"{label:>26} {percentile(values, 0.5):>8.2f} {percentile(values, 0.99):>8.2f}")
    ratio = percentile(timings[True], 0.5) / percentile(timings[False], 0.5)
    print(f"ratio caller-scored / bm25() p50: {ratio:.2f}")


if __name__ == "__main__":
    main()
