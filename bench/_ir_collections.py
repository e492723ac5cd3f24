"""The retrieval-quality bench's test collections, metrics and significance test.

Two forms are read:

- **Cranfield** (``ir/cranfield``): the SMART files ``cran.all.1400``, ``cran.qry`` and
  ``cranqrel``. Grades (see ``PROVENANCE.md``): 1 is the most relevant, 4 the least; gain =
  5 − grade. The one document per query graded −1 (the paper the question was written from)
  counts as not relevant (gain 0, not counted for recall). Queries are numbered by position.
- **the uniform form** (``ir/med``, ``ir/cacm``, ``ir/adi``, ``ir/time`` or any folder given
  with ``--collection``): ``docs.jsonl`` ``{"id", "title", "text"}``, ``queries.jsonl``
  ``{"id", "text"}`` and ``qrels.tsv`` (header ``query_id doc_id relevance``); the relevance is
  the gain (binary, 1, in the four shipped collections).

Only judged queries (at least one document with a positive gain) are kept: CACM has 64
queries and 52 judged ones.
"""

from __future__ import annotations

import csv
import importlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = [
    "DEFAULT_COLLECTIONS",
    "Collection",
    "Document",
    "Query",
    "load",
    "load_cranfield",
    "load_uniform",
    "ndcg_at",
    "paired_randomization_p",
    "recall_at",
]

# The shipped collections, in the order the tables print them.
DEFAULT_COLLECTIONS = ("cranfield", "med", "cacm", "adi", "time")


@attrs.frozen
class Document:
    """One record: its key (as text), title and body."""

    key: str
    title: str
    text: str


@attrs.frozen
class Query:
    """One judged question and the gain of each relevant document (only gains > 0 kept)."""

    id: str
    text: str
    gains: dict[str, int]


@attrs.frozen
class Collection:
    """A test collection: its documents and its judged queries."""

    name: str
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    graded: bool
    # How many queries the collection has, judged or not, and how many of them are judged
    # (``queries`` may hold only the first few of those, see ``first``).
    all_queries: int
    judged_queries: int

    @property
    def longest_text(self) -> int:
        """The longest title + body of the collection, in characters."""
        return max((len(d.title) + 1 + len(d.text) for d in self.documents), default=0)

    def first(self, n: int) -> Collection:
        """The same collection with only its first ``n`` judged queries."""
        return attrs.evolve(self, queries=self.queries[:n])


def _smart_records(text: str) -> list[tuple[str, dict[str, str]]]:
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


def _judged(
    name: str,
    docs: list[Document],
    queries: list[tuple[str, str]],
    gains: dict[str, dict[str, int]],
) -> list[Query]:
    keys = {d.key for d in docs}
    judged = []
    for query_id, text in queries:
        relevant = {d: g for d, g in gains.get(query_id, {}).items() if g > 0}
        unknown = set(relevant) - keys
        if unknown:
            msg = f"{name}: query {query_id} judges unknown documents {sorted(unknown)[:3]}"
            raise ValueError(msg)
        if relevant:
            judged.append(Query(query_id, text, relevant))
    return judged


def load_cranfield(folder: Path) -> Collection:
    """Read the SMART Cranfield files (graded: gain 5 − grade, grade −1 not relevant)."""
    docs = [
        Document(str(int(key)), parts.get("T", ""), parts.get("W", ""))
        for key, parts in _smart_records((folder / "cran.all.1400").read_text())
    ]
    # cranqrel numbers the queries by position 1..225 (cran.qry's own numbers skip values).
    queries = [
        (str(position), parts.get("W", ""))
        for position, (_, parts) in enumerate(
            _smart_records((folder / "cran.qry").read_text()), start=1
        )
    ]
    gains: dict[str, dict[str, int]] = {}
    for line in (folder / "cranqrel").read_text().splitlines():
        if line.strip():
            query, doc, grade = line.split()[:3]
            gain = 5 - int(grade) if 1 <= int(grade) <= 4 else 0
            gains.setdefault(query, {})[str(int(doc))] = gain
    judged = _judged(folder.name, docs, queries, gains)
    return Collection(
        folder.name, tuple(docs), tuple(judged), True, len(queries), judged_queries=len(judged)
    )


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def load_uniform(folder: Path) -> Collection:
    """Read ``docs.jsonl``, ``queries.jsonl`` and ``qrels.tsv`` (relevance = gain)."""
    docs = [
        Document(str(row["id"]), str(row.get("title") or ""), str(row.get("text") or ""))
        for row in _jsonl(folder / "docs.jsonl")
    ]
    queries = [(str(row["id"]), str(row["text"])) for row in _jsonl(folder / "queries.jsonl")]
    gains: dict[str, dict[str, int]] = {}
    with (folder / "qrels.tsv").open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            gains.setdefault(row["query_id"].strip(), {})[row["doc_id"].strip()] = int(
                row["relevance"]
            )
    graded = any(g > 1 for judged in gains.values() for g in judged.values())
    judged = _judged(folder.name, docs, queries, gains)
    return Collection(
        folder.name, tuple(docs), tuple(judged), graded, len(queries), judged_queries=len(judged)
    )


def load(folder: Path) -> Collection:
    """Read a collection folder in either form (the SMART Cranfield files take precedence)."""
    if (folder / "cran.all.1400").exists():
        return load_cranfield(folder)
    return load_uniform(folder)


def ndcg_at(ranking: Sequence[str], gains: dict[str, int], k: int = 10) -> float:
    """nDCG@k with the query's gains (unjudged documents gain 0), linear gain, log2 discount."""
    dcg = sum(gains.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranking: Sequence[str], gains: dict[str, int], k: int = 100) -> float:
    """Share of the relevant (positive-gain) documents found in the first ``k``."""
    relevant = {d for d, g in gains.items() if g > 0}
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0


def paired_randomization_p(
    scores: Sequence[float], baseline: Sequence[float], *, permutations: int = 10_000, seed: int = 0
) -> float:
    """Two-sided paired randomization test (sign flipping of per-query differences).

    Under the null hypothesis each per-query difference is as likely to have either sign; the
    p-value is the share of ``permutations`` random sign assignments whose mean difference is
    at least as far from 0 as the observed one (with the observed assignment counted, so it is
    never 0). Seeded: the same scores always give the same p-value.
    """
    # numpy arrives with bm25s (the bench session installs it); imported by name like bm25s.
    np: Any = importlib.import_module("numpy")
    diffs = np.asarray(scores, dtype=float) - np.asarray(baseline, dtype=float)
    if diffs.size == 0 or not np.any(diffs):
        return 1.0
    observed = abs(diffs.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, diffs.size))
    means = np.abs(signs @ diffs) / diffs.size
    extreme = int(np.count_nonzero(means >= observed - 1e-12))
    return (extreme + 1) / (permutations + 1)
