"""Stage 7 under a time budget: a model call that overruns it costs the rerank, nothing else.

Also ``record_item``: what the rerank shows of a record, built without a search, for warming
a model's caches ahead of the first question.
"""

from __future__ import annotations

import logging

import pytest

from esra.core._pipeline.aggregation import Candidate
from esra.core._pipeline.rerank import RerankOutcome, record_item, rerank, rerank_item
from esra.core.codes import WarningCode
from esra.core.config import MaskingKind, MaskingRule, RerankWeights
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import FakeLanguageModel
from tests.core._ranking_fixtures import candidate, mapping

NAMES = {"s-a": "Alpha Wiki", "s-b": "Beta Tickets"}


def _candidates() -> list[Candidate]:
    # The search (weighted) order is a0, b0, a1, b1, a2, and round-robin sends them in that
    # order too; ``_reverse`` scores them the other way round, so the model's effect shows.
    return [
        candidate("s-a", "a0", 0.9),
        candidate("s-a", "a1", 0.7),
        candidate("s-a", "a2", 0.5),
        candidate("s-b", "b0", 0.8),
        candidate("s-b", "b1", 0.6),
    ]


def _reverse(prompt: Prompt) -> str:
    ids = [item.tag for item in prompt.reference]
    scores = ", ".join(
        f'{{"id": "{rid}", "score": {i / len(ids):.3f}}}' for i, rid in enumerate(ids)
    )
    return f'{{"scores": [{scores}]}}'


async def _rerank(model: FakeLanguageModel, *, timeout_s: float | None) -> RerankOutcome:
    return await rerank(
        "find the quarterly report",
        _candidates(),
        model=model,
        weights=RerankWeights(),
        max_candidates=40,
        fragment_chars=400,
        source_names=NAMES,
        model_profile="default",
        timeout_s=timeout_s,
    )


def _keys(outcome: RerankOutcome) -> list[str]:
    return [r.candidate.key for r in outcome.ranked]


SEARCH_ORDER = ["a0", "b0", "a1", "b1", "a2"]


async def test_a_model_call_past_its_budget_falls_back_to_the_search_order() -> None:
    """A model that never answers is cut off: every candidate, weighted order, one warning."""
    model = FakeLanguageModel(stalled={PromptTask.RERANK})
    outcome = await _rerank(model, timeout_s=0.01)
    assert _keys(outcome) == SEARCH_ORDER
    assert [w.code for w in outcome.warnings] == [WarningCode.ESRA_RERANK_FALLBACK]
    assert all(r.semantic is None for r in outcome.ranked)
    assert [r.final for r in outcome.ranked] == [r.candidate.weighted for r in outcome.ranked]
    assert len(model.prompts_for(PromptTask.RERANK)) == 1


async def test_no_budget_left_means_the_model_is_not_asked() -> None:
    """At zero or less the rerank falls back at once, without a prompt being sent."""
    for budget in (0.0, -1.0):
        model = FakeLanguageModel({PromptTask.RERANK: _reverse})
        outcome = await _rerank(model, timeout_s=budget)
        assert _keys(outcome) == SEARCH_ORDER
        assert [w.code for w in outcome.warnings] == [WarningCode.ESRA_RERANK_FALLBACK]
        assert model.prompts == []


async def test_a_model_answering_within_its_budget_decides_as_before() -> None:
    """A budget the model meets changes nothing: same order as with no budget at all."""
    bounded = await _rerank(FakeLanguageModel({PromptTask.RERANK: _reverse}), timeout_s=60.0)
    unbounded = await _rerank(FakeLanguageModel({PromptTask.RERANK: _reverse}), timeout_s=None)
    assert bounded.warnings == unbounded.warnings == ()
    assert _keys(bounded) == _keys(unbounded)
    assert _keys(bounded)[0] == "a2"  # the model's best, the search's worst


async def test_overrunning_and_failing_are_told_apart_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The log says the budget ran out only when it did; a model's own TimeoutError is a
    failure like any other (and neither quotes the prompt)."""

    def own_timeout(prompt: Prompt) -> str:
        raise TimeoutError(prompt.request)

    with caplog.at_level(logging.WARNING, logger="esra.core._pipeline.rerank"):
        await _rerank(FakeLanguageModel(stalled={PromptTask.RERANK}), timeout_s=0.01)
        await _rerank(FakeLanguageModel({PromptTask.RERANK: own_timeout}), timeout_s=60.0)
    overran, failed = (r.getMessage() for r in caplog.records)
    assert "overran" in overran
    assert "failed (TimeoutError)" in failed
    assert "quarterly" not in caplog.text


def test_record_item_shows_what_a_rerank_shows_of_a_record_no_term_matched() -> None:
    """Same allowlist, masking and bounds as ``rerank_item`` for a candidate without terms."""
    m = mapping(masking=(MaskingRule(field="body", kind=MaskingKind.EMAIL),))
    values = {
        "title": "Quarterly report",
        "body": "Ask ana@example.org for the figures.",
        "salary": "99000",
        "internal_note": "do not show",
    }
    item = record_item(m, values, fragment_chars=400, source_name="Alpha Wiki", result_id="r_x")
    found = Candidate(
        source_id="s-a",
        mapping=m,
        key="k",
        values=values,
        best_weighted=1.0,
        bonus=0.0,
        provenance=(),
    )
    assert item == rerank_item(found, "r_x", fragment_chars=400, source_name="Alpha Wiki")
    assert item.title == "Quarterly report"
    assert "ana@example.org" not in item.fragments[0]
    assert "99000" not in repr(item)
    assert "do not show" not in repr(item)


def test_record_item_of_a_short_record_matches_any_search_for_it() -> None:
    """A content within ``fragment_chars`` is shown whole whatever terms found it."""
    m = mapping()
    values = {"title": "Leave", "body": "Annual leave is 28 days; ask your manager."}
    found = candidate("s-a", "k", 1.0, m=m, values=values, terms=("manager",))
    assert record_item(m, values, fragment_chars=400, result_id="r_1") == rerank_item(
        found, "r_1", fragment_chars=400, source_name=""
    )
