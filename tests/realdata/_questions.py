"""The retrieval questions asked of every engine, and how their answers are compared.

Each question names the records a right answer contains (``Question.expected``: any one of
them is enough, because AdventureWorks sells one product per size and colour with one shared
description, and Chinook has the same song on several albums, or many songs by one artist).
A record is identified as ``<mapping>:<key>`` from the record-key field every mapping returns.

"Comparable" across engines, asserted by ``test_cross_engine.py``:

1. **hit@5** — on every engine, some expected record is among the top ``TOP_N`` results;
2. **relevance agreement** — for every pair of engines and every question, the number of
   expected records in their top ``TOP_N`` differs by at most ``MAX_RELEVANT_GAP``, unless
   the question declares that engine divergent (``Question.diverges``, with the reason; the
   test then insists the divergence is still there, so a fix is noticed);
3. **record overlap** — over all questions, each pair's mean share of identical records in
   the top ``TOP_N`` (shared / the shorter list, at most ``TOP_N``) is at least
   ``MIN_MEAN_OVERLAP``.

Identical records are not required per question: when many records are equally right (135
U2 tracks, a frame sold in eight sizes with one description) the engines break the tie
differently, which is no disagreement. Ranks within the top ``TOP_N`` are not compared:
FTS5's bm25, PostgreSQL's BM25 in the statement and InnoDB's relevance score differently,
and ESRA's rerank then mixes those scores with its own lexical evidence.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from esra.core._audit.logging_sink import LoggingAuditSink
from esra.core._response import ResultItem
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.ports import SearchProvider
from esra.llm import LocalModel
from tests.realdata._config import realdata_context, realdata_snapshot
from tests.realdata._data import RealData

__all__ = [
    "MAX_RELEVANT_GAP",
    "MIN_MEAN_OVERLAP",
    "QUESTIONS",
    "TOP_N",
    "Answer",
    "Question",
    "answer_all",
    "overlap",
    "record_of",
]

TOP_N = 5
MAX_RELEVANT_GAP = 2
MIN_MEAN_OVERLAP = 0.5

_KEY_FIELDS = {
    "track_id": "tracks",
    "product_id": "products",
    "review_id": "product_reviews",
    "candidate_id": "job_candidates",
}


@dataclass(frozen=True)
class Question:
    """A question, the source that should answer it, and the records a right answer holds.

    ``records`` lists expected records by id; ``where`` adds every row of a table whose
    column holds one of the given values (e.g. every track by an artist), resolved against
    the parsed data. ``diverges`` maps an engine to why its answer is known to differ.
    """

    id: str
    text: str
    source: str
    records: frozenset[str] = frozenset()
    where: tuple[str, str, tuple[str, ...]] | None = None
    diverges: Mapping[str, str] = field(default_factory=dict, compare=False)

    def expected(self, data: RealData) -> frozenset[str]:
        found = set(self.records)
        if self.where is not None:
            name, column, values = self.where
            table = data.table(name)
            index = [c.name for c in table.columns].index(column)
            found.update(f"{name}:{row[0]}" for row in table.rows if row[index] in values)
        return frozenset(found)


def _q(
    qid: str,
    text: str,
    source: str,
    *records: str,
    where: tuple[str, str, tuple[str, ...]] | None = None,
    diverges: Mapping[str, str] | None = None,
) -> Question:
    return Question(qid, text, source, frozenset(records), where, dict(diverges or {}))


_MUSIC, _PRODUCTS, _JOBS = "Music catalog", "Product catalog", "Job applicants"

QUESTIONS: tuple[Question, ...] = (
    # The same song, studio and live: either is right.
    _q(
        "iron-maiden",
        "Songs by Iron Maiden about the fear of the dark",
        _MUSIC,
        "tracks:1234",
        "tracks:1267",
    ),
    # The artist is spelled "Antônio": only accent folding (or the other words) finds him.
    _q(
        "jobim",
        "Bossa nova by Antonio Carlos Jobim",
        _MUSIC,
        where=("tracks", "artist", ("Antônio Carlos Jobim",)),
        diverges={
            "postgres": "the english configuration does not fold accents: the required "
            "term 'Antonio' never matches 'Antônio', so only 'Santo Antonio' is found"
        },
    ),
    _q("beethoven", "Beethoven symphony", _MUSIC, "tracks:3359", "tracks:3415", "tracks:3442"),
    # A two-character name: below MariaDB's minimum FULLTEXT token size.
    _q("u2", "Songs by U2", _MUSIC, where=("tracks", "artist", ("U2",))),
    _q("miles-davis", "Miles Davis jazz", _MUSIC, where=("tracks", "artist", ("Miles Davis",))),
    _q(
        "socks",
        "Which socks prevent blisters on long rides?",
        _PRODUCTS,
        "product_reviews:1",
    ),
    # One description shared by every size and colour of a frame. Every mountain frame is
    # aluminum: the ML's "heat-treated aluminum frame", the HL's "welded aluminum frame" and
    # the LL's "same, ground-breaking frame technology as the ML aluminum frame".
    _q(
        "aluminum-frame",
        "mountain bike frame made of aluminum",
        _PRODUCTS,
        where=(
            "products",
            "model",
            ("ML Mountain Frame", "ML Mountain Frame-W", "LL Mountain Frame", "HL Mountain Frame"),
        ),
    ),
    _q("helmet", "lightweight helmet", _PRODUCTS, where=("products", "model", ("Sport-100",))),
    _q("pedals", "pedals reviews mud and sand", _PRODUCTS, "product_reviews:2"),
    _q("cnc", "candidate with CNC machinist experience", _JOBS, "job_candidates:1"),
    _q(
        "sales-team",
        "candidate with experience managing a sales team",
        _JOBS,
        "job_candidates:4",
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


def overlap(first: Answer, second: Answer) -> float:
    """Share of identical records in two top lists: shared / the shorter list (≤ TOP_N)."""
    a, b = first.top(), second.top()
    shorter = min(len(a), len(b))
    return len(set(a) & set(b)) / shorter if shorter else float(len(a) == len(b))


def record_of(item: ResultItem) -> str:
    """``<mapping>:<key>`` of a result, from the record-key field its mapping returns."""
    for key_field, mapping in _KEY_FIELDS.items():
        if key_field in item.fields:
            return f"{mapping}:{item.fields[key_field]}"
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
