"""Retrieval quality on five test collections: nDCG@10, R@100 per collection, engine, ranking.

Why: a ranking change that helps one collection and hurts the others is not an improvement,
and ESRA's pipeline must be judged against what the engine alone and a plain BM25 library
already reach. So every judged query of Cranfield, MED, CACM, ADI and TIME (or of the
folders given with ``--collection``) is run through every ranking on every engine, and each
ranking is compared with BM25 on the same queries.

Collections (``bench/_ir_collections.py``; data from ``ESRA_SHARED_DATA``, default
``../shared/data`` beside the project, folder ``ir/<name>``): Cranfield from its SMART files,
graded (gain 5 − grade; the grade −1 paper counts as not relevant); the others in the
uniform form (``docs.jsonl``, ``queries.jsonl``, ``qrels.tsv``), binary. Queries without a
relevant document are skipped (CACM: 52 of 64 are judged).

Engines (``bench/_ir_engines.py``): SQLite FTS5 always; PostgreSQL (``english`` tsvector) when
``ESRA_TEST_POSTGRES_DSN`` is set and reachable; MariaDB / MySQL (InnoDB FULLTEXT) when
``ESRA_TEST_MYSQL_DSN`` is set and reachable. Each gets the collection in a private table,
schema or database, removed afterwards; an unset or unreachable server is skipped with a
notice. Fields and columns are named ``qxkey``, ``qxtitle``, ``qxbody``: no question can name
them, so the LocalModel never narrows a result's fields to a named one and drops the key.

Rankings, per collection and engine, over the same queries:

- **bm25**: ``bm25s`` (``method="lucene"``, k1 1.5, b 0.75) over title + body, tokenized by
  ``bm25s.tokenize`` with its English stop words and PyStemmer's Porter stemmer; documents
  with score 0 are not ranked. Engine-independent: computed once per collection and reported
  under every engine. It is the reference of the ratio and of the significance test.
- **engine**: the engine's own full-text ranking, no model: one KEYWORD ``ValidatedQuery``
  (issued directly, as the provider tests do) whose optional terms are every distinct content
  word of the question (lower-cased, stop words and single characters dropped, no cap on the
  count), 100 rows, ranked by the provider as it ranks any ORed terms: FTS5 ``bm25()``
  (the adapter's default tokenizer), the PostgreSQL provider's BM25 computed in the
  statement (``english`` configuration), InnoDB natural-language ``MATCH`` relevance (no stemming,
  words of 3 characters or more).
- **esra-local**: the whole ``Retriever`` pipeline (selection, planning, validation,
  execution, aggregation, rerank, response) with the offline ``esra.llm.LocalModel()`` and
  the default 0.7 / 0.3 rerank weights.
- **esra-local-embeddings**: the same with ``LocalModel.with_embeddings()``, whose rerank
  blends all-MiniLM-L6-v2 similarity with its lexical score, in a capability whose rerank
  weights (1.0 / 0.0) let that score decide (see ``SEMANTIC_DECIDES``). Skipped with a notice
  when the ``esra-llm[embeddings]`` extra is not installed (``nox -s bench`` installs it).

Both ESRA rankings run in a capability of 100 rows per query, 100 rerank candidates, up to
64 terms per query and a 600 s invocation timeout (see ``INVOCATION_TIMEOUT_S``: a rerank
cut off by the deadline would measure its fallback, not the model), and an exposure
returning the top 100 with whole texts (``fragment_chars`` above the collection's longest
document, a size cap that never truncates), so the rerank judges and the score sees complete
records.

Metrics per (collection, engine, ranking): nDCG@10 (linear gain, log2 discount; graded on
Cranfield), R@100, ``zero`` (queries with no result), ``no_key`` (ESRA results without the
record key; they count as irrelevant and should never occur), ``warn`` (degraded responses),
ms per query, and a two-sided paired randomization test (10,000 seeded sign flips of the
per-query nDCG@10 differences) against bm25 → ``p``. After the per-collection tables, a macro
table averages nDCG@10 and R@100 over the collections, with the ratios to bm25. Nothing here
is tuned on the queries.

Options: ``--quick`` (the first 20 judged queries per collection), ``--rankings`` (a comma
list; bm25 always runs, being the reference), ``--engines``, ``--collection DIR``
(repeatable; replaces the defaults; NAME is the folder name), ``--sqlite-tokenize SPEC``
(another FTS5 tokenizer than the adapter's default, e.g. ``unicode61 remove_diacritics 2``
without stemming), ``--term-words N`` (the engine ranking's optional terms are N adjacent
content words each, the last possibly fewer, issued as the validator issues a plan's: as
their words; the ESRA rankings plan their own terms and are unchanged), ``--embeddings-cache
FILE`` (keep the MiniLM vectors in an ``EmbeddingCache`` file across runs) and ``--json
FILE``.
The embeddings ranking encodes every candidate text (and windows of long ones) with MiniLM
on the CPU, seconds per query: ``--rankings bm25,engine,esra-local`` runs everything else in
a few minutes. One embedding model serves every engine, so its vector cache makes the first
engine of each collection pay for the encoding: the ranking's ms/query is not comparable
across engines.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

# Run as a script (``python bench/retrieval_quality.py``, as ``nox -s bench`` does), the
# project root is not on the path; the private helpers live in the ``bench`` package.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._ir_collections import (
    DEFAULT_COLLECTIONS,
    Collection,
    Query,
    load,
    ndcg_at,
    paired_randomization_p,
    recall_at,
)
from bench._ir_engines import (
    DEPTH,
    ENGINES,
    FIELD_WORDS,
    KEY_FIELD,
    SOURCE,
    TENANT,
    TITLE_FIELD,
    Engine,
    EngineSetup,
    mariadb_engine,
    mariadb_reachable,
    postgres_engine,
    postgres_reachable,
    sqlite_engine,
)
from esra.core._context import CallerIdentity, InvocationContext
from esra.core._pipeline.optional_words import optional_words
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, Strategy
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    CapabilityLimits,
    ConfigSnapshot,
    Exposure,
    RerankWeights,
    Source,
    SourceBinding,
)
from esra.core.testing import InMemoryAuditSink
from esra.llm import LocalModel
from esra.sqlite import DEFAULT_TOKENIZE

BM25 = "bm25"
ENGINE = "engine"
LOCAL = "esra-local"
EMBEDDED = "esra-local-embeddings"
RANKINGS = (BM25, ENGINE, LOCAL, EMBEDDED)
QUICK_QUERIES = 20
MAX_TERMS = 64
# Quality, not latency: the core cuts the rerank's model call off shortly before the
# invocation deadline and falls back to the search order, so under the default 20 s a
# MiniLM rerank of 100 whole texts on a small CPU would measure that fallback instead of the
# embeddings. The lexical rerank takes well under a second either way. ``warn`` counts any
# response that still degraded.
INVOCATION_TIMEOUT_S = 600.0
PERMUTATIONS = 10_000
SEED = 20261201
# The embedding rerank's score already blends 0.3 of the LocalModel's lexical score into its
# meaning score; the core's default 0.3 of the retrieval score on top would count the words
# twice. A capability served by a semantic reranker lets the reranker decide (the retrieval
# score still breaks ties and orders anything the model left unscored).
SEMANTIC_DECIDES = RerankWeights(semantic=1.0, lexical=0.0)
# A common English stop-word list (the question words included) for the engine ranking's
# terms; the engines' own analysers (stemming, stop words) apply on top.
_STOP_TEXT = """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each
    few for from further had has have having he her here hers how i if in into is it its itself
    just may me might more most must my no nor not now of off on once only or other our out over
    own same shall she should so some such than that the their them then there these they this
    those through to too under until up upon very was we were what when where which while who
    whom why will with would you your yet anyone available exist existing find give given
    made make obtained one"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
# How the LocalModel splits text into words (letters and digits; ``_`` separates).
_WORD = re.compile(r"[^\W_]+")


@attrs.frozen
class Outcome:
    """One query's ranking (record keys, best first) and what went wrong on the way."""

    ranking: list[str]
    no_key: int = 0
    warnings: tuple[str, ...] = ()


Ranker = Callable[[Query], Awaitable[Outcome]]


@attrs.define
class Score:
    """One (collection, engine, ranking) run: per-query values and the run's diagnostics."""

    ndcg: list[float] = attrs.field(factory=list)
    recall: list[float] = attrs.field(factory=list)
    zero: int = 0
    no_key: int = 0
    warned: int = 0
    warning_codes: Counter[str] = attrs.field(factory=Counter)
    seconds: float = 0.0
    p_vs_bm25: float | None = None

    def add(self, query: Query, outcome: Outcome, seconds: float) -> None:
        """Score one query's outcome."""
        self.ndcg.append(ndcg_at(outcome.ranking, query.gains, 10))
        self.recall.append(recall_at(outcome.ranking, query.gains, DEPTH))
        self.zero += not outcome.ranking
        self.no_key += outcome.no_key
        self.warned += bool(outcome.warnings)
        self.warning_codes.update(outcome.warnings)
        self.seconds += seconds

    @property
    def mean_ndcg(self) -> float:
        return sum(self.ndcg) / len(self.ndcg) if self.ndcg else 0.0

    @property
    def mean_recall(self) -> float:
        return sum(self.recall) / len(self.recall) if self.recall else 0.0

    @property
    def ms_per_query(self) -> float:
        return self.seconds * 1000 / len(self.ndcg) if self.ndcg else 0.0

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` entry of this run."""
        return {
            "ndcg10": round(self.mean_ndcg, 4),
            "recall100": round(self.mean_recall, 4),
            "zero_result": self.zero,
            "ms_per_query": round(self.ms_per_query, 2),
            "p_vs_bm25": None if self.p_vs_bm25 is None else round(self.p_vs_bm25, 4),
            "no_key": self.no_key,
            "warned": self.warned,
            "warnings": dict(sorted(self.warning_codes.items())),
            "queries": len(self.ndcg),
            # In the collection's query order, so two runs' files can be compared query by
            # query (bench._ir_collections.paired_randomization_p).
            "ndcg10_per_query": [round(value, 6) for value in self.ndcg],
        }


# collection -> engine -> ranking -> score
Results = dict[str, dict[str, dict[str, Score]]]


def _progress(message: str) -> None:
    print(f"retrieval_quality: {message}", file=sys.stderr, flush=True)


def _data_root() -> Path:
    shared = os.environ.get("ESRA_SHARED_DATA", "").strip()
    base = Path(shared) if shared else Path(__file__).resolve().parents[2] / "shared" / "data"
    return base / "ir"


def content_words(text: str) -> list[str]:
    """Distinct lower-cased alphanumeric words minus stop words and single characters."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return list(dict.fromkeys(w for w in words if w not in STOP_WORDS and len(w) > 1))


# --- bm25 -----------------------------------------------------------------------------------


def bm25_scores(collection: Collection) -> Score:
    """Rank with bm25s (Lucene BM25, English stop words, Porter stems) and score it."""
    # Neither bm25s nor PyStemmer ships type information; the bench session installs both.
    bm25s: Any = importlib.import_module("bm25s")
    stemmer: Any = importlib.import_module("Stemmer").Stemmer("porter")

    def analyse(texts: list[str]) -> Any:
        return bm25s.tokenize(
            texts, stopwords="en", stemmer=stemmer.stemWords, return_ids=False, show_progress=False
        )

    documents = collection.documents
    index = bm25s.BM25(method="lucene")
    index.index(
        bm25s.tokenize(
            [f"{d.title} {d.text}" for d in documents],
            stopwords="en",
            stemmer=stemmer.stemWords,
            show_progress=False,
        ),
        show_progress=False,
    )
    score = Score()
    for query in collection.queries:
        started = time.perf_counter()
        terms = analyse([query.text])[0]
        values = index.get_scores(terms) if terms else [0.0] * len(documents)
        found = (i for i in range(len(documents)) if values[i] > 0)
        order = sorted(found, key=lambda i: (-values[i], i))[:DEPTH]
        score.add(query, Outcome([documents[i].key for i in order]), time.perf_counter() - started)
    return score


# --- engine and ESRA rankings ---------------------------------------------------------------


def engine_terms(question: str, term_words: int = 1) -> tuple[str, ...]:
    """The engine ranking's optional terms: the question's content words, ``term_words`` at a
    time (adjacent ones joined by a space; the last term may have fewer)."""
    words = content_words(question)
    return tuple(" ".join(words[i : i + term_words]) for i in range(0, len(words), term_words))


def _engine_query(engine: Engine, question: str, n: int, term_words: int = 1) -> ValidatedQuery:
    # Issued directly, as the provider tests do: this is the engine's ranking, no planner, and
    # no cap on the number of terms.
    return _issue(
        query_id=f"{SOURCE}#{n}",
        source_id=SOURCE,
        mapping=engine.mapping,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        # As the validator issues a plan's optional terms: its words, each once.
        optional_terms=optional_words(engine_terms(question, term_words)),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField(TITLE_FIELD, TITLE_FIELD),),
        freshness=None,
        row_limit=DEPTH,
    )


def _snapshot(
    collection: Collection, engine: Engine, weights: RerankWeights, slug: str
) -> ConfigSnapshot:
    source = Source(
        id=SOURCE,
        tenant_id=TENANT,
        name=f"{collection.name} documents",
        description=f"The documents of the {collection.name} test collection.",
        provider_kind=engine.provider_kind,
        connection_ref=SOURCE,
    )
    capability = Capability(
        id="cap",
        tenant_id=TENANT,
        name=collection.name,
        bindings=(SourceBinding(SOURCE, BindingMode.MANDATORY),),
        limits=CapabilityLimits(
            max_rows_per_query=DEPTH,
            max_rerank_candidates=DEPTH,
            max_terms_per_query=MAX_TERMS,
            invocation_timeout_s=INVOCATION_TIMEOUT_S,
        ),
        rerank_weights=weights,
    )
    # Whole texts: the rerank judges complete records, and no result is cut by the size cap.
    shown = collection.longest_text + 100
    exposure = Exposure(
        id="exp",
        tenant_id=TENANT,
        slug=slug,
        capability_id="cap",
        audience=frozenset({"bench"}),
        published=True,
        top_k=DEPTH,
        size_cap_chars=DEPTH * 3 * shown + 100_000,
        fragment_chars=shown,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="1",
        sources=(source,),
        mappings=(engine.mapping,),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def _engine_ranker(engine: Engine, term_words: int = 1) -> Ranker:
    counter = iter(range(1_000_000))

    async def rank(query: Query) -> Outcome:
        rows = await engine.provider.execute(
            _engine_query(engine, query.text, next(counter), term_words), timeout_s=30.0
        )
        return Outcome([row.key for row in rows])

    return rank


def _esra_ranker(
    collection: Collection, engine: Engine, model: LocalModel, weights: RerankWeights
) -> Ranker:
    slug = "collection"
    retriever = Retriever(
        config=StaticConfigRepository([_snapshot(collection, engine, weights, slug)]),
        providers={SOURCE: engine.provider},
        model=model,
        audit=InMemoryAuditSink(),
    )
    counter = iter(range(1_000_000))

    async def rank(query: Query) -> Outcome:
        ctx = InvocationContext(
            tenant_id=TENANT,
            client_app_id="bench",
            caller=CallerIdentity(subject="bench"),
            exposure_slug=slug,
            correlation_id=f"q{next(counter)}",
        )
        response = await retriever.retrieve(ctx, query.text)
        ranking: list[str] = []
        no_key = 0
        for position, item in enumerate(response.results):
            key = item.fields.get(KEY_FIELD)
            if key:
                ranking.append(key)
            else:
                # Keeps its place, gains nothing: a result the bench cannot identify.
                no_key += 1
                ranking.append(f"\0no-key-{position}")
        return Outcome(ranking, no_key, tuple(str(w.code) for w in response.warnings))

    return rank


async def _run(ranker: Ranker, queries: Sequence[Query]) -> Score:
    score = Score()
    for query in queries:
        started = time.perf_counter()
        outcome = await ranker(query)
        score.add(query, outcome, time.perf_counter() - started)
    return score


async def _engine_scores(
    collection: Collection,
    setup: EngineSetup,
    rankings: Sequence[str],
    embedded: LocalModel | None,
    term_words: int = 1,
) -> dict[str, Score]:
    scores: dict[str, Score] = {}
    async with setup(collection) as engine:
        rankers: dict[str, Callable[[], Ranker]] = {
            ENGINE: lambda: _engine_ranker(engine, term_words),
            LOCAL: lambda: _esra_ranker(collection, engine, LocalModel(), RerankWeights()),
        }
        if embedded is not None:
            rankers[EMBEDDED] = lambda: _esra_ranker(collection, engine, embedded, SEMANTIC_DECIDES)
        for name, make in rankers.items():
            if name in rankings:
                started = time.perf_counter()
                scores[name] = await _run(make(), collection.queries)
                _progress(
                    f"{collection.name}/{engine.name}/{name}: {len(collection.queries)} queries "
                    f"in {time.perf_counter() - started:.1f} s"
                )
    return scores


# --- reporting ------------------------------------------------------------------------------


def _p_text(p: float | None) -> str:
    if p is None:
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _print_collection(collection: Collection, by_engine: dict[str, dict[str, Score]]) -> None:
    relevance = "graded, gain 5 - grade (grade -1 not relevant)" if collection.graded else "binary"
    skipped = collection.all_queries - collection.judged_queries
    scored = len(collection.queries)
    print()
    print(
        f"retrieval_quality: {collection.name} - {len(collection.documents):,} documents, "
        + (
            f"{scored} judged queries"
            if scored == collection.judged_queries
            else f"the first {scored} of {collection.judged_queries} judged queries"
        )
        + (f" ({skipped} without judgements skipped)" if skipped > 0 else "")
        + f", {relevance}"
    )
    print(
        f"{'engine':<9} {'ranking':<22} {'nDCG@10':>7} {'R@100':>6} {'vs BM25':>7} {'p':>7} "
        f"{'zero':>4} {'no_key':>6} {'warn':>4} {'ms/query':>8}"
    )
    for engine, rankings in by_engine.items():
        bm25 = rankings[BM25].mean_ndcg
        for name in RANKINGS:
            s = rankings.get(name)
            if s is None:
                continue
            ratio = s.mean_ndcg / bm25 if bm25 else float("nan")
            no_key = "-" if name in (BM25, ENGINE) else str(s.no_key)
            print(
                f"{engine:<9} {name:<22} {s.mean_ndcg:>7.3f} {s.mean_recall:>6.3f} {ratio:>7.2f} "
                f"{_p_text(s.p_vs_bm25):>7} {s.zero:>4} {no_key:>6} {s.warned:>4} "
                f"{s.ms_per_query:>8.1f}"
            )
    codes: Counter[str] = Counter()
    for rankings in by_engine.values():
        for s in rankings.values():
            codes.update(s.warning_codes)
    if codes:
        print("warnings: " + ", ".join(f"{c} x{n}" for c, n in sorted(codes.items())))


def _macro(results: Results) -> dict[str, dict[str, dict[str, float]]]:
    """Mean over collections of nDCG@10 and R@100 per engine and ranking."""
    macro: dict[str, dict[str, dict[str, float]]] = {}
    for engine in ENGINES:
        for name in RANKINGS:
            runs = [r[engine][name] for r in results.values() if name in r.get(engine, {})]
            if runs:
                macro.setdefault(engine, {})[name] = {
                    "ndcg10": sum(s.mean_ndcg for s in runs) / len(runs),
                    "recall100": sum(s.mean_recall for s in runs) / len(runs),
                    "collections": len(runs),
                }
    return macro


def _print_macro(macro: dict[str, dict[str, dict[str, float]]], collections: int) -> None:
    print()
    print(f"retrieval_quality: macro average over {collections} collection(s)")
    print(
        f"{'engine':<9} {'ranking':<22} {'nDCG@10':>7} {'R@100':>6} {'nDCG/BM25':>9} "
        f"{'R/BM25':>6} {'n':>2}"
    )
    for engine, rankings in macro.items():
        bm25 = rankings[BM25]
        for name, m in rankings.items():
            ndcg_ratio = m["ndcg10"] / bm25["ndcg10"] if bm25["ndcg10"] else float("nan")
            recall_ratio = m["recall100"] / bm25["recall100"] if bm25["recall100"] else float("nan")
            print(
                f"{engine:<9} {name:<22} {m['ndcg10']:>7.3f} {m['recall100']:>6.3f} "
                f"{ndcg_ratio:>9.2f} {recall_ratio:>6.2f} {int(m['collections']):>2}"
            )


def _write_json(
    path: Path,
    collections: Sequence[Collection],
    results: Results,
    macro: dict[str, dict[str, dict[str, float]]],
    args: argparse.Namespace,
) -> None:
    document = {
        "collections": {
            name: {
                engine: {ranking: s.as_json() for ranking, s in rankings.items()}
                for engine, rankings in by_engine.items()
            }
            for name, by_engine in results.items()
        },
        "macro": {
            engine: {
                ranking: {k: round(v, 4) if k != "collections" else int(v) for k, v in m.items()}
                for ranking, m in rankings.items()
            }
            for engine, rankings in macro.items()
        },
        "meta": {
            "quick": args.quick,
            "sqlite_tokenize": args.sqlite_tokenize,
            "term_words": args.term_words,
            "depth": DEPTH,
            "permutations": PERMUTATIONS,
            "seed": SEED,
            "collections": {
                c.name: {
                    "documents": len(c.documents),
                    "queries": c.all_queries,
                    "judged_queries": c.judged_queries,
                    "queries_scored": len(c.queries),
                    "graded": c.graded,
                }
                for c in collections
            },
        },
    }
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nretrieval_quality: wrote {path}")


# --- command line ---------------------------------------------------------------------------


def _choices(text: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [c for c in chosen if c not in allowed]
    if unknown:
        msg = f"unknown {what} {', '.join(unknown)} (choose from {', '.join(allowed)})"
        raise argparse.ArgumentTypeError(msg)
    return chosen


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"score the first {QUICK_QUERIES} judged queries of each collection only",
    )
    parser.add_argument(
        "--rankings",
        type=lambda t: _choices(t, RANKINGS, "ranking"),
        default=list(RANKINGS),
        help=f"comma list of rankings to run (default: {','.join(RANKINGS)}); bm25 always runs",
    )
    parser.add_argument(
        "--engines",
        type=lambda t: _choices(t, ENGINES, "engine"),
        default=list(ENGINES),
        help=f"comma list of engines (default: {','.join(ENGINES)}, each where available)",
    )
    parser.add_argument(
        "--collection",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a collection folder (docs.jsonl, queries.jsonl, qrels.tsv); repeatable; "
        "replaces the default five",
    )
    parser.add_argument(
        "--sqlite-tokenize",
        default=DEFAULT_TOKENIZE,
        metavar="SPEC",
        help=f"the FTS5 tokenizer of the SQLite index (default: the adapter's, "
        f"{DEFAULT_TOKENIZE!r})",
    )
    parser.add_argument(
        "--embeddings-cache",
        type=Path,
        metavar="FILE",
        help="keep MiniLM vectors in this EmbeddingCache file, so a second run (or another "
        "engine) encodes nothing it has encoded before; ms/query then excludes encoding",
    )
    parser.add_argument(
        "--term-words",
        type=_positive,
        default=1,
        metavar="N",
        help="the engine ranking's optional terms are N adjacent content words each (default "
        "1: one word a term), issued as the validator issues them (as their words); the ESRA "
        "rankings plan their own terms",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        msg = f"expected a positive count, got {text}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _collections(folders: Sequence[Path]) -> list[Collection]:
    if not folders:
        root = _data_root()
        folders = [root / name for name in DEFAULT_COLLECTIONS]
        present = [f for f in folders if f.is_dir()]
        for missing in sorted(set(folders) - set(present)):
            print(f"retrieval_quality: {missing} not found; that collection is skipped")
        folders = present
    loaded: list[Collection] = []
    for folder in folders:
        collection = load(folder)
        if any(c.name == collection.name for c in loaded):
            msg = f"two collections are named {collection.name!r}"
            raise SystemExit(msg)
        clash = {
            w for q in collection.queries for w in _WORD.findall(q.text.casefold())
        } & FIELD_WORDS
        if clash:
            print(
                f"retrieval_quality: {collection.name} questions use the field names "
                f"{sorted(clash)}; their ESRA results may lose fields"
            )
        loaded.append(collection)
    return loaded


def _engine_setups(names: Sequence[str], sqlite_tokenize: str) -> dict[str, EngineSetup]:
    setups: dict[str, EngineSetup] = {}
    if "sqlite" in names:
        setups["sqlite"] = sqlite_engine(sqlite_tokenize)
    servers: tuple[tuple[str, str, str, Callable[[str], bool], Callable[[str], EngineSetup]], ...]
    servers = (
        ("postgres", "ESRA_TEST_POSTGRES_DSN", "PostgreSQL", postgres_reachable, postgres_engine),
        ("mariadb", "ESRA_TEST_MYSQL_DSN", "MariaDB", mariadb_reachable, mariadb_engine),
    )
    for name, variable, label, reachable, setup in servers:
        if name not in names:
            continue
        dsn = os.environ.get(variable, "").strip()
        if not dsn:
            print(f"retrieval_quality: {variable} not set; {label} skipped")
        elif reachable(dsn):
            setups[name] = setup(dsn)
    return setups


def _embedded_model(cache: Path | None) -> LocalModel | None:
    try:
        return LocalModel.with_embeddings(cache_path=cache)
    except ImportError as exc:
        print(f"retrieval_quality: {exc}; the {EMBEDDED!r} ranking is skipped")
        return None


async def _measure(
    collections: Sequence[Collection],
    setups: dict[str, EngineSetup],
    rankings: Sequence[str],
    embedded: LocalModel | None,
    term_words: int = 1,
) -> Results:
    results: Results = {}
    for collection in collections:
        started = time.perf_counter()
        bm25 = bm25_scores(collection)
        _progress(f"{collection.name}/bm25 in {time.perf_counter() - started:.1f} s")
        by_engine: dict[str, dict[str, Score]] = {}
        for engine, setup in setups.items():
            scores = await _engine_scores(collection, setup, rankings, embedded, term_words)
            for s in scores.values():
                s.p_vs_bm25 = paired_randomization_p(
                    s.ndcg, bm25.ndcg, permutations=PERMUTATIONS, seed=SEED
                )
            by_engine[engine] = {BM25: bm25, **scores}
        results[collection.name] = by_engine
        _print_collection(collection, by_engine)
    return results


def main() -> None:
    """Score every ranking on every available engine and collection; print the tables."""
    args = _parser().parse_args()
    collections = _collections(args.collection)
    if not collections:
        print("retrieval_quality: no collection to score; skipped")
        return
    if args.quick:
        collections = [c.first(QUICK_QUERIES) for c in collections]
    setups = _engine_setups(args.engines, args.sqlite_tokenize)
    print(
        f"retrieval_quality: {len(collections)} collection(s), engines "
        f"{', '.join(setups) or 'none'}, rankings "
        f"{', '.join(r for r in RANKINGS if r == BM25 or r in args.rankings)}"
        + (f" (quick: first {QUICK_QUERIES} judged queries)" if args.quick else "")
        + (f"; engine terms of {args.term_words} words" if args.term_words > 1 else "")
        + (
            f"; SQLite tokenizer {args.sqlite_tokenize!r}"
            if args.sqlite_tokenize != DEFAULT_TOKENIZE
            else ""
        )
    )
    if not setups:
        print("retrieval_quality: no engine to run; skipped")
        return
    embedded = _embedded_model(args.embeddings_cache) if EMBEDDED in args.rankings else None
    try:
        results = asyncio.run(
            _measure(collections, setups, args.rankings, embedded, args.term_words)
        )
    finally:
        if embedded is not None:
            embedded.close()  # the --embeddings-cache file, if one was opened
    macro = _macro(results)
    _print_macro(macro, len(results))
    if args.json:
        _write_json(args.json, collections, results, macro, args)


if __name__ == "__main__":
    main()
