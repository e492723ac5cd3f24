"""The retrieval questions asked of every engine, and how their answers are compared.

Each question names the records a right answer contains (``expected``: any one of them is
enough, because AdventureWorks sells one product per size and colour with one shared
description, and Chinook has the same song on several albums). A record is identified as
``<mapping>:<key>`` from the record-key field every mapping returns.

"Comparable" across engines, asserted by ``test_cross_engine.py``:

1. on every engine, some expected record is among the top ``TOP_N`` results;
2. for every pair of engines and every question, their top ``TOP_N`` records share at least
   ``MIN_SHARED`` records (the expected one among them);
3. over all questions, each pair's mean top-``TOP_N`` overlap (shared / ``TOP_N``) is at
   least ``MIN_MEAN_OVERLAP``.

Ranks within the top ``TOP_N`` are not compared: the three engines score differently
(FTS5 bm25, ``ts_rank`` normalised by document length, InnoDB's own relevance), and ESRA's
reranking then mixes those scores with its own lexical evidence.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from esra.core.logging_audit import LoggingAuditSink
from esra.core.ports import SearchProvider
from esra.core.response import ResultItem
from esra.core.retriever import Retriever
from esra.core.static_config import StaticConfigRepository
from esra.llm import LocalModel
from tests.realdata._config import realdata_context, realdata_snapshot

__all__ = [
    "MIN_MEAN_OVERLAP",
    "MIN_SHARED",
    "QUESTIONS",
    "TOP_N",
    "Answer",
    "Question",
    "answer_all",
    "record_of",
]

TOP_N = 5
MIN_SHARED = 2
MIN_MEAN_OVERLAP = 0.6

_KEY_FIELDS = {
    "track_id": "tracks",
    "product_id": "products",
    "review_id": "product_reviews",
    "candidate_id": "job_candidates",
}


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    source: str
    expected: frozenset[str]
    note: str = ""


def _q(qid: str, text: str, source: str, *expected: str, note: str = "") -> Question:
    return Question(qid, text, source, frozenset(expected), note)


QUESTIONS: tuple[Question, ...] = (
    _q(
        "iron-maiden",
        "Songs by Iron Maiden about the fear of the dark",
        "Music catalog",
        "tracks:1234",
        "tracks:1267",
        note="two live and studio versions of the same song",
    ),
    _q(
        "jobim",
        "Bossa nova by Antonio Carlos Jobim",
        "Music catalog",
        *(f"tracks:{n}" for n in range(63, 77)),
        note="the artist is spelled Antônio: accent folding differs per engine",
    ),
    _q(
        "beethoven",
        "Beethoven symphony",
        "Music catalog",
        "tracks:3359",
        "tracks:3415",
        "tracks:3442",
    ),
    _q(
        "socks",
        "Which socks prevent blisters on long rides?",
        "Product catalog",
        "product_reviews:1",
    ),
    _q(
        "aluminum-frame",
        "mountain bike frame made of aluminum",
        "Product catalog",
        *(f"products:{n}" for n in (814, 830, 831, 832, 904)),
    ),
    _q(
        "cnc",
        "candidate with CNC machinist experience",
        "Job applicants",
        "job_candidates:1",
    ),
    _q(
        "pedals",
        "pedals reviews mud and sand",
        "Product catalog",
        "product_reviews:2",
    ),
)


@dataclass(frozen=True)
class Answer:
    """One engine's answer to one question: records best first, with titles for reports."""

    records: tuple[str, ...]
    titles: tuple[str, ...]
    status: str

    def top(self, n: int = TOP_N) -> tuple[str, ...]:
        return self.records[:n]


def record_of(item: ResultItem) -> str:
    """``<mapping>:<key>`` of a result, from the record-key field its mapping returns."""
    for field, mapping in _KEY_FIELDS.items():
        if field in item.fields:
            return f"{mapping}:{item.fields[field]}"
    return f"?:{item.title}"


ProviderFactory = Callable[[], Mapping[str, SearchProvider]]


async def answer_all(
    make_providers: ProviderFactory, questions: Sequence[Question] = QUESTIONS
) -> dict[str, Answer]:
    """Ask every question through a fresh Retriever over the providers ``make_providers`` builds.

    The providers are created inside the running event loop (server providers' pools belong
    to it) and closed afterwards.
    """
    snapshot = realdata_snapshot()
    providers = make_providers()
    retriever = Retriever(
        config=StaticConfigRepository([snapshot]),
        providers=providers,
        model=LocalModel(),
        audit=LoggingAuditSink(),
    )
    answers: dict[str, Answer] = {}
    try:
        for question in questions:
            response = await retriever.retrieve(realdata_context(question.id), question.text)
            answers[question.id] = Answer(
                records=tuple(record_of(item) for item in response.results),
                titles=tuple(item.title for item in response.results),
                status=response.status.value,
            )
    finally:
        for provider in providers.values():
            closed = getattr(provider, "close", None)
            result = closed() if callable(closed) else None
            if inspect.isawaitable(result):
                await _wait(result)
    return answers


async def _wait(result: Awaitable[object]) -> None:
    await result
