"""The same questions, the same configuration, three engines: comparable top results.

Every question goes through the whole pipeline (``Retriever`` with ``esra.llm.LocalModel``:
scope, source selection, planning, validation, execution, aggregation, rerank) over the real
Chinook and AdventureWorks data on SQLite (FTS5), PostgreSQL (``tsvector``, ``english``) and
MariaDB (InnoDB FULLTEXT). What "comparable" means is defined in ``_questions.py``; where
the engines differ, and why, is written down in ``docs/engines.md``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from tests.realdata._config import realdata_snapshot
from tests.realdata._data import RealData
from tests.realdata._questions import (
    MAX_RELEVANT_GAP,
    MIN_MEAN_OVERLAP,
    QUESTIONS,
    TOP_N,
    Answer,
    Question,
    overlap,
)

pytestmark = [pytest.mark.integration, pytest.mark.external_data]

_MARKS = {
    "sqlite": (),
    "postgres": (pytest.mark.postgres,),
    "mysql": (pytest.mark.mysql,),
}
ENGINES = [pytest.param(e, marks=_MARKS[e], id=e) for e in _MARKS]
PAIRS = [
    pytest.param(a, b, marks=(*_MARKS[a], *_MARKS[b]), id=f"{a}-{b}")
    for a, b in itertools.combinations(_MARKS, 2)
]
Answers = Callable[[str], dict[str, Answer]]


def _show(engine: str, answer: Answer) -> str:
    rows = zip(answer.records, answer.titles, strict=True)
    listed = "; ".join(f"{r} {t!r}" for r, t in itertools.islice(rows, TOP_N))
    return f"{engine} ({answer.status}): {listed or '(no results)'}"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_the_expected_record_is_in_the_top_results(
    answers_of: Answers, real_data: RealData, engine: str, question: Question
) -> None:
    """On every engine, some record a right answer contains is among the top five."""
    answer = answers_of(engine)[question.id]
    assert question.expected(real_data) & set(answer.top()), _show(engine, answer)


def _agreement_cases() -> list[Any]:
    cases = []
    for question in QUESTIONS:
        for first, second in itertools.combinations(_MARKS, 2):
            marks: list[Any] = [*_MARKS[first], *_MARKS[second]]
            reasons = [question.diverges[e] for e in (first, second) if e in question.diverges]
            if reasons:
                marks.append(pytest.mark.xfail(strict=True, reason="; ".join(reasons)))
            cases.append(
                pytest.param(
                    question, first, second, marks=marks, id=f"{question.id}-{first}-{second}"
                )
            )
    return cases


@pytest.mark.parametrize(("question", "first", "second"), _agreement_cases())
def test_engines_agree_on_how_many_top_results_are_right(
    answers_of: Answers, real_data: RealData, question: Question, first: str, second: str
) -> None:
    """Two engines' top fives hold nearly as many right records (declared divergences xfail)."""
    a, b = answers_of(first)[question.id], answers_of(second)[question.id]
    expected = question.expected(real_data)
    gap = abs(len(expected & set(a.top())) - len(expected & set(b.top())))
    assert gap <= MAX_RELEVANT_GAP, f"{_show(first, a)}\n{_show(second, b)}"


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_mean_top_overlap_between_engines(answers_of: Answers, first: str, second: str) -> None:
    """Over all questions, two engines' top fives share at least MIN_MEAN_OVERLAP records."""
    a, b = answers_of(first), answers_of(second)
    overlaps = {q.id: round(overlap(a[q.id], b[q.id]), 2) for q in QUESTIONS}
    mean = sum(overlaps.values()) / len(overlaps)
    assert mean >= MIN_MEAN_OVERLAP, f"mean {mean:.2f}: {overlaps}"


@pytest.mark.parametrize("engine", ENGINES)
def test_every_question_reaches_its_source_first(answers_of: Answers, engine: str) -> None:
    """Source selection is engine-independent: the first result comes from the right source."""
    snapshot = realdata_snapshot()
    names = {s.id: s.name for s in snapshot.sources}
    source_of = {m.id: names[m.source_id] for m in snapshot.mappings}
    answers = answers_of(engine)
    wrong = {
        q.id: (answers[q.id].status, answers[q.id].records[:1])
        for q in QUESTIONS
        if answers[q.id].status != "complete"
        or source_of.get(answers[q.id].records[0].split(":")[0]) != q.source
    }
    assert not wrong, wrong
