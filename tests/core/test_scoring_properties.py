"""Property tests for the scoring math: normalization, bonus cap, round-robin fairness,
the null-semantic rule and the determinism of the final order."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._pipeline.aggregation import (
    MAX_EXTRA_MATCH_BONUS,
    Candidate,
    aggregate,
    extra_match_bonus,
    freshness_weight,
    normalize,
)
from esra.core._pipeline.rerank import RerankOutcome, rerank, round_robin
from esra.core.config import RerankWeights
from esra.core.prompts import PromptTask
from esra.core.testing import FakeLanguageModel
from tests.core._ranking_fixtures import candidate, mapping, query, result, scoring

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SOURCES = ("s-a", "s-b", "s-c", "s-d")

finite = st.floats(allow_nan=False, allow_infinity=False)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
# Per source, the weighted scores of its candidates (keys are made unique below).
per_source = st.dictionaries(st.sampled_from(SOURCES), st.lists(unit, max_size=6), max_size=4)


def _candidates(lists: dict[str, list[float]]) -> list[Candidate]:
    return [
        candidate(source, f"{source}-{n}", weighted, values={"title": f"{source}-{n}", "body": "b"})
        for source, scores in lists.items()
        for n, weighted in enumerate(scores)
    ]


def _run(
    cands: list[Candidate], semantic: dict[str, float | None], max_candidates: int
) -> RerankOutcome:
    model = FakeLanguageModel({PromptTask.RERANK: scoring(lambda p: semantic.get(p["title"]))})
    return asyncio.run(
        rerank(
            "request",
            cands,
            model=model,
            weights=RerankWeights(),
            max_candidates=max_candidates,
            fragment_chars=100,
            source_names={},
            model_profile="default",
        )
    )


@settings(deadline=None)
@given(st.lists(finite, max_size=30))
def test_normalization_stays_in_unit_interval_and_preserves_order(scores: list[float]) -> None:
    """Every normalized score is in [0, 1]; min → 0 and max → 1 (all 1.0 when max == min);
    and a higher native score never normalizes lower."""
    normalized = normalize(scores)
    assert len(normalized) == len(scores)
    assert all(0.0 <= n <= 1.0 for n in normalized)
    if scores and max(scores) == min(scores):
        assert normalized == [1.0] * len(scores)
    elif scores:
        assert normalized[scores.index(min(scores))] == 0.0
        assert normalized[scores.index(max(scores))] == 1.0
    pairs = sorted(zip(scores, normalized, strict=True))
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(pairs))


@settings(deadline=None)
@given(st.datetimes(timezones=st.just(UTC)))
def test_freshness_weight_is_in_the_half_open_unit_interval(moment: datetime) -> None:
    """Freshness never boosts and never zeroes: 0 < weight ≤ 1."""
    assert 0.0 < freshness_weight(moment, NOW) <= 1.0


@settings(deadline=None)
@given(
    matches=st.integers(min_value=1, max_value=25),
    noise=st.lists(st.tuples(st.sampled_from("abcdef"), finite), max_size=10),
    priority=st.floats(min_value=0.0, max_value=10.0),
)
def test_extra_match_bonus_never_exceeds_the_cap(
    matches: int, noise: list[tuple[str, float]], priority: float
) -> None:
    """Whatever number of queries find a record, its bonus is min(0.02 × (n − 1), 0.1)."""
    m = mapping()
    results = [
        result(query(f"s-a#{n}", m), [("shared", 1.0, {}), *((k, s, {}) for k, s in noise)])
        for n in range(matches)
    ]
    for cand in aggregate(results, priority={"s-a": priority}, now=NOW):
        assert 0.0 <= cand.bonus <= MAX_EXTRA_MATCH_BONUS
        assert cand.bonus == extra_match_bonus(len(cand.provenance))
        assert 0.0 <= cand.best_weighted <= priority
    assert extra_match_bonus(matches) == min(0.02 * (matches - 1), 0.1)


@settings(deadline=None)
@given(per_source, st.integers(min_value=0, max_value=30))
def test_round_robin_is_fair_across_sources(lists: dict[str, list[float]], limit: int) -> None:
    """Counts taken from two sources differ by at most one unless one ran out; each source's
    take is its best-first prefix; and with limit ≥ sources every source's best is taken."""
    cands = _candidates(lists)
    taken = round_robin(cands, limit)
    assert len(taken) == min(limit, len(cands))
    counts = Counter(c.source_id for c in taken)
    sizes = {s: len(v) for s, v in lists.items()}
    for s, size in sizes.items():
        for t in sizes:
            if counts[s] + 1 < counts[t]:
                assert counts[s] == size, "a source was short-changed without running out"
    for source, scores in lists.items():
        got = sorted((c.weighted for c in taken if c.source_id == source), reverse=True)
        assert got == sorted(scores, reverse=True)[: counts[source]]
    non_empty = [s for s, v in lists.items() if v]
    if limit >= len(non_empty):
        for source in non_empty:
            assert counts[source] >= 1


@settings(deadline=None, max_examples=60)
@given(
    lists=per_source,
    semantic=st.dictionaries(
        st.sampled_from([f"{s}-{n}" for s in SOURCES for n in range(6)]), st.none() | unit
    ),
    max_candidates=st.integers(min_value=0, max_value=30),
)
def test_every_omitted_candidate_ranks_below_every_scored_one(
    lists: dict[str, list[float]], semantic: dict[str, float | None], max_candidates: int
) -> None:
    """The null-semantic rule: no candidate without a model score outranks one with a score,
    and the scored ones are in descending final order."""
    outcome = _run(_candidates(lists), semantic, max_candidates)
    flags = [r.semantic is None for r in outcome.ranked]
    assert flags == sorted(flags)
    scored = [r.final for r in outcome.ranked if r.semantic is not None]
    assert scored == sorted(scored, reverse=True)


@settings(deadline=None, max_examples=60)
@given(
    lists=per_source,
    semantic=st.dictionaries(
        st.sampled_from([f"{s}-{n}" for s in SOURCES for n in range(6)]), st.none() | unit
    ),
    max_candidates=st.integers(min_value=0, max_value=30),
    data=st.data(),
)
def test_final_order_is_deterministic(
    lists: dict[str, list[float]],
    semantic: dict[str, float | None],
    max_candidates: int,
    data: st.DataObject,
) -> None:
    """Same inputs give the same order and scores, whatever the (random) result ids and
    whatever order the candidates arrive in."""
    cands = _candidates(lists)
    shuffled = data.draw(st.permutations(cands))
    first = _run(cands, semantic, max_candidates)
    second = _run(list(shuffled), semantic, max_candidates)

    def signature(outcome: RerankOutcome) -> list[tuple[str, str, float, float | None]]:
        return [
            (r.candidate.source_id, r.candidate.key, r.final, r.semantic) for r in outcome.ranked
        ]

    assert signature(first) == signature(second)
    assert first.warnings == second.warnings


@settings(deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(SOURCES), st.sampled_from("wxyz"), finite), max_size=20
    ),
    data=st.data(),
)
def test_aggregation_is_independent_of_result_order(
    rows: list[tuple[str, str, float]], data: st.DataObject
) -> None:
    """Permuting the query results changes nothing in the aggregated candidates."""
    results = [
        result(query(f"{source}#{n}", mapping(f"m-{source}", source)), [(key, score, {"n": n})])
        for n, (source, key, score) in enumerate(rows)
    ]
    shuffled = data.draw(st.permutations(results))
    assert aggregate(results, priority={}, now=NOW) == aggregate(
        list(shuffled), priority={}, now=NOW
    )
