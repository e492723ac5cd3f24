"""The Retriever under its invocation deadline: a slow rerank degrades, it does not erase.

The rerank's model call gets what is left before the deadline less the response reserve
(``RESPONSE_RESERVE_SHARE`` of the invocation timeout); when it overruns, the results found
so far come back in search order with ``ESRA_RERANK_FALLBACK``, instead of the deadline
returning nothing.
"""

from __future__ import annotations

import asyncio

import attrs

from esra.core._response import ResponseStatus, RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, WarningCode
from esra.core.config import CapabilityLimits
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import make_capability, make_context, make_snapshot, make_source

ROWS = {
    "m-s-1": [
        {"col_id": 1, "col_title": "Annual leave policy", "col_body": "Employees get 28 days"},
        {"col_id": 2, "col_title": "Travel policy", "col_body": "Book travel via the desk"},
    ],
    "m-s-2": [
        {"col_id": 10, "col_title": "Leave request form", "col_body": "Request leave early"},
    ],
}
# Small enough for a quick test, large enough that every other stage (in-memory fakes)
# finishes well inside it.
TIMEOUT_S = 1.0


async def _retrieve(model: FakeLanguageModel) -> tuple[RetrievalResponse, InMemoryAuditSink]:
    capability = attrs.evolve(
        make_capability(["s-1", "s-2"]),
        limits=CapabilityLimits(invocation_timeout_s=TIMEOUT_S, attempt_timeout_s=TIMEOUT_S),
    )
    snapshot = make_snapshot([make_source("s-1"), make_source("s-2")], capability=capability)
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS), "s-2": InMemorySearchProvider(ROWS)},
        model=model,
        audit=audit,
        clock=FakeClock(),
    )
    return await retriever.retrieve(make_context(), "leave policy"), audit


def _fail(prompt: Prompt) -> str:
    raise RuntimeError("rerank model down")


async def test_a_stalled_rerank_returns_the_results_in_search_order() -> None:
    """A rerank model that never answers: results, not ESRA_INVOCATION_DEADLINE and nothing."""
    response, _ = await _retrieve(FakeLanguageModel(stalled={PromptTask.RERANK}))
    assert response.results
    assert response.status is ResponseStatus.DEGRADED
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_RERANK_FALLBACK]


async def test_the_stalled_rerank_order_is_the_order_of_a_failed_rerank() -> None:
    """Cut off in time, the rerank falls back exactly as when its model fails outright."""
    stalled, _ = await _retrieve(FakeLanguageModel(stalled={PromptTask.RERANK}))
    failed, _ = await _retrieve(FakeLanguageModel({PromptTask.RERANK: _fail}))
    assert [r.title for r in stalled.results] == [r.title for r in failed.results]
    assert [r.score for r in stalled.results] == [r.score for r in failed.results]


async def test_the_fallback_is_audited_as_a_degraded_retrieval() -> None:
    """The esra.retrieve record counts the results and names the rerank fallback."""
    response, audit = await _retrieve(FakeLanguageModel(stalled={PromptTask.RERANK}))
    (record,) = audit.events(AuditEvent.RETRIEVE)
    assert record.outcome == ResponseStatus.DEGRADED.value
    assert record.dimensions["results"] == len(response.results)
    assert record.dimensions["warnings"] == (WarningCode.ESRA_RERANK_FALLBACK.value,)


async def test_a_rerank_model_that_answers_in_time_still_decides() -> None:
    """The budget only cuts off an overrun: a model answering after a pause is used."""

    class Pausing(FakeLanguageModel):
        async def complete(self, prompt: Prompt) -> str:
            if prompt.task is PromptTask.RERANK:
                await asyncio.sleep(0.01)
            return await super().complete(prompt)

    response, _ = await _retrieve(Pausing())
    assert response.status is ResponseStatus.COMPLETE
    assert response.warnings == ()
    assert response.results
