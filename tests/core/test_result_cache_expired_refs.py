"""The result cache's store never fails an invocation whose response is already made.

A response's document references were minted a moment before it is stored; the answer model
runs in between. When that took longer than the references' lifetime (``document_ref_ttl_s``
may be as short as one second), the store could no longer open them to recover the record
locators, and its ``DocumentNotFoundError`` ended the whole search as
``ESRA_DOCUMENT_NOT_FOUND`` — a complete response lost to a cache write.
"""

from __future__ import annotations

import json

from esra.core._prompts.model import Prompt, PromptTask
from esra.core._response import ResponseStatus
from esra.core._retriever import Retriever
from esra.core.config import BindingMode, CapabilityLimits, ResponseMode, SourceBinding
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryCache,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import (
    make_capability,
    make_context,
    make_exposure,
    make_snapshot,
    make_source,
)

REF_TTL_S = 1.0


def _answer_from_first(prompt: Prompt) -> str:
    first = prompt.reference[0].tag  # each item's tag is the result id it may cite
    return json.dumps({"answer": f"See [{first}].", "citations": [first]})


ROWS = {"m-s-1": [{"col_id": 1, "col_title": "leave policy", "col_body": "leave policy text"}]}


def _retriever(clock: FakeClock, cache: InMemoryCache, model: FakeLanguageModel) -> Retriever:
    capability = make_capability(
        [SourceBinding("s-1", BindingMode.MANDATORY)],
        limits=CapabilityLimits(result_cache_ttl_s=60.0),
        response_modes=frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER}),
    )
    snapshot = make_snapshot(
        [make_source("s-1", answer_permitted=True)],
        capability=capability,
        exposure=make_exposure(fetch_enabled=True),
    )
    return Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS)},
        model=model,
        audit=InMemoryAuditSink(),
        clock=clock,
        cache=cache,
        keyring=Keyring.generate("k1"),
        document_ref_ttl_s=REF_TTL_S,
    )


async def test_a_slow_answer_outliving_the_references_still_returns_the_response() -> None:
    clock = FakeClock()

    def slow_answer(prompt: Prompt) -> str:
        # The answer model took longer than a reference lives.
        clock.advance(REF_TTL_S + 1)
        return _answer_from_first(prompt)

    model = FakeLanguageModel({PromptTask.ANSWER: slow_answer})
    cache = InMemoryCache(clock)
    retriever = _retriever(clock, cache, model)

    response = await retriever.retrieve(make_context(), "leave policy")

    assert response.status is ResponseStatus.COMPLETE
    assert [r.title for r in response.results] == ["leave policy"]
    assert response.answer is not None


async def test_a_response_whose_references_expired_is_not_cached() -> None:
    clock = FakeClock()

    def slow_answer(prompt: Prompt) -> str:
        clock.advance(REF_TTL_S + 1)
        return _answer_from_first(prompt)

    cache = InMemoryCache(clock)
    retriever = _retriever(clock, cache, FakeLanguageModel({PromptTask.ANSWER: slow_answer}))

    await retriever.retrieve(make_context(), "leave policy")

    held = cache.keys()
    assert [key for key in held if ":result:" in key] == []
