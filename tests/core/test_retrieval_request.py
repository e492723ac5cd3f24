"""RetrievalRequest: the prompt, the caller's filters and top-K cross into the core as one.

top-K is applied by the core before the answer is composed, so an answer only ever cites
what the caller receives (nothing to withhold afterwards); it never widens the exposure's
own top-K; and the result cache keys on it.
"""

from __future__ import annotations

import math

import attrs
import pytest

from esra.core._config.capability import CapabilityLimits
from esra.core._query import PlannedFilter
from esra.core._request import RetrievalRequest
from esra.core._retriever import Retriever
from esra.core.codes import WarningCode
from esra.core.config import BindingMode, ResponseMode, SourceBinding
from esra.core.exceptions import InvalidRequestError
from esra.core.prompts import PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import make_capability, make_context, make_snapshot, make_source

ROWS = {
    "m-s-1": [
        {"col_id": n, "col_title": f"Leave rule {n}", "col_body": f"annual leave detail {n}"}
        for n in range(1, 6)
    ]
}


def _retriever(*, cache: InMemoryCache | None = None) -> tuple[Retriever, FakeLanguageModel]:
    capability = make_capability(
        [SourceBinding("s-1", BindingMode.MANDATORY)],
        response_modes=frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER}),
        limits=attrs.evolve(CapabilityLimits(), result_cache_ttl_s=60.0),
    )
    snapshot = make_snapshot([make_source("s-1", answer_permitted=True)], capability=capability)
    model = FakeLanguageModel()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS)},
        model=model,
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
        cache=cache,
    )
    return retriever, model


async def test_top_k_cuts_the_results_before_the_answer_is_composed() -> None:
    retriever, model = _retriever()
    everything = await retriever.retrieve(make_context(), "annual leave")
    assert len(everything.results) == 5

    retriever, model = _retriever()
    two = await retriever.retrieve(make_context(), RetrievalRequest("annual leave", top_k=2))
    assert [r.title for r in two.results] == [r.title for r in everything.results[:2]]
    # The answer model was shown exactly the two results the caller gets, so the answer
    # cites within them and is never withheld for citing beyond top-K.
    (prompt,) = model.prompts_for(PromptTask.ANSWER)
    assert {item.tag for item in prompt.reference} == {r.result_id for r in two.results}
    assert two.answer is not None
    assert set(two.answer.citations) <= {r.result_id for r in two.results}
    assert WarningCode.ESRA_ANSWER_WITHHELD not in {w.code for w in two.warnings}


async def test_top_k_never_widens_the_exposures_own() -> None:
    retriever, _ = _retriever()
    response = await retriever.retrieve(make_context(), RetrievalRequest("annual leave", top_k=50))
    assert len(response.results) == 5  # every row; the exposure's top-K (10) is the ceiling


async def test_the_result_cache_keys_on_top_k() -> None:
    cache = InMemoryCache()
    retriever, _ = _retriever(cache=cache)
    one = await retriever.retrieve(make_context(), RetrievalRequest("annual leave", top_k=1))
    three = await retriever.retrieve(make_context(), RetrievalRequest("annual leave", top_k=3))
    again = await retriever.retrieve(make_context(), RetrievalRequest("annual leave", top_k=1))
    assert (len(one.results), len(three.results), len(again.results)) == (1, 3, 1)


@pytest.mark.parametrize(
    ("request_", "filters", "problem"),
    [
        (RetrievalRequest("annual leave", top_k=0), (), "topK must be at least 1"),
        (RetrievalRequest("   "), (), "must be 1 to"),
        # Nothing but control characters is no request either: it cost two model calls and
        # came back degraded with ESRA_PLAN_REJECTED, where blanks are refused up front.
        (RetrievalRequest("\x00"), (), "control characters"),
        (RetrievalRequest(" \x07\x1b\x7f\x85 "), (), "control characters"),
        (
            RetrievalRequest("leave", filters=(PlannedFilter("title", "eq", "x"),)),
            (PlannedFilter("title", "eq", "y"),),
            "not both",
        ),
    ],
    ids=["top-k-zero", "blank-prompt", "nul-prompt", "control-prompt", "filters-twice"],
)
async def test_a_malformed_request_is_refused_before_any_stage(
    request_: RetrievalRequest, filters: tuple[PlannedFilter, ...], problem: str
) -> None:
    retriever, model = _retriever()
    with pytest.raises(InvalidRequestError, match=problem):
        await retriever.retrieve(make_context(), request_, filters=filters)
    assert all(model.prompts_for(task) == [] for task in PromptTask)


async def test_control_characters_beside_words_are_still_a_request() -> None:
    """Planning drops them from the words; only a prompt of nothing else is refused."""
    retriever, _ = _retriever()
    response = await retriever.retrieve(make_context(), RetrievalRequest("annual\x00 leave"))
    assert response.results


@pytest.mark.parametrize("ttl_s", [0.0, -1.0, math.inf, math.nan, 10.0**12])
def test_a_reference_lifetime_no_reference_can_carry_is_refused_at_construction(
    ttl_s: float,
) -> None:
    """An infinite or astronomically long lifetime passed ``> 0``, and then every search of
    a fetch-enabled exposure failed as ESRA_INTERNAL when minting its references."""
    with pytest.raises(ValueError, match="document_ref_ttl_s"):
        Retriever(
            config=InMemoryConfigRepository([]),
            providers={},
            model=FakeLanguageModel(),
            audit=InMemoryAuditSink(),
            clock=FakeClock(),
            document_ref_ttl_s=ttl_s,
        )
