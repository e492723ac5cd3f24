"""Model token usage: metered per invocation, summed onto its ``esra.retrieve`` record."""

from __future__ import annotations

import asyncio

import pytest

from esra.core._model_usage import (
    ModelUsage,
    UsageMeter,
    current_meter,
    metered,
    report_model_usage,
)
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent
from esra.core.prompts import Prompt
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import make_context, make_snapshot, make_source

_ROWS = {
    "m-s-1": [{"col_id": 1, "col_title": "Annual leave policy", "col_body": "28 days leave"}],
    "m-s-2": [{"col_id": 2, "col_title": "Leave form", "col_body": "Request leave early"}],
}


class _MeteredModel(FakeLanguageModel):
    """The fake model, reporting ``tokens`` input and 10 output tokens per call."""

    def __init__(self, tokens: int = 100) -> None:
        super().__init__()
        self.tokens = tokens

    async def complete(self, prompt: Prompt) -> str:
        await asyncio.sleep(0)  # let concurrent calls interleave
        report_model_usage(ModelUsage(input_tokens=self.tokens, output_tokens=10))
        return await super().complete(prompt)


def _retriever(model: FakeLanguageModel) -> tuple[Retriever, InMemoryAuditSink]:
    snapshot = make_snapshot([make_source("s-1"), make_source("s-2")])
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(_ROWS), "s-2": InMemorySearchProvider(_ROWS)},
        model=model,
        audit=audit,
        clock=FakeClock(),
    )
    return retriever, audit


def test_a_meter_sums_what_is_reported_inside_it() -> None:
    """Each report counts one call and adds its tokens; outside a meter nothing happens."""
    report_model_usage(ModelUsage(input_tokens=5, output_tokens=5))
    with metered() as meter:
        assert current_meter() is meter
        report_model_usage(ModelUsage(input_tokens=120, output_tokens=30))
        report_model_usage(ModelUsage(input_tokens=80, output_tokens=0))
    assert current_meter() is None
    assert meter == UsageMeter(calls=2, input_tokens=200, output_tokens=30)
    assert meter.dimensions() == {
        "model_calls": 2,
        "model_input_tokens": 200,
        "model_output_tokens": 30,
    }


def test_an_unused_meter_adds_no_dimensions() -> None:
    """A model that reports nothing leaves the audit record as it was."""
    assert UsageMeter().dimensions() == {}


def test_usage_is_never_negative() -> None:
    """A negative token count is refused."""
    with pytest.raises(ValueError, match="input_tokens"):
        ModelUsage(input_tokens=-1, output_tokens=0)


async def test_tasks_started_inside_a_meter_report_into_it() -> None:
    """Concurrent calls of one invocation (as planning makes) share its meter."""

    async def call() -> None:
        await asyncio.sleep(0)
        report_model_usage(ModelUsage(input_tokens=1, output_tokens=2))

    with metered() as meter:
        await asyncio.gather(*(call() for _ in range(5)))
    assert (meter.calls, meter.input_tokens, meter.output_tokens) == (5, 5, 10)


async def test_a_model_that_reports_usage_puts_totals_on_the_retrieve_record() -> None:
    """Selection, planning (per source) and rerank calls are all counted."""
    model = _MeteredModel()
    retriever, audit = _retriever(model)
    await retriever.retrieve(make_context(), "leave policy")
    (record,) = audit.events(AuditEvent.RETRIEVE)
    calls = len(model.prompts)
    assert calls == 4  # selection, planning for two sources, rerank
    assert record.dimensions["model_calls"] == calls
    assert record.dimensions["model_input_tokens"] == 100 * calls
    assert record.dimensions["model_output_tokens"] == 10 * calls


async def test_a_model_that_reports_nothing_leaves_the_record_unchanged() -> None:
    """The port is unchanged: a model without usage adds no dimension."""
    retriever, audit = _retriever(FakeLanguageModel())
    await retriever.retrieve(make_context(), "leave policy")
    (record,) = audit.events(AuditEvent.RETRIEVE)
    assert not {"model_calls", "model_input_tokens", "model_output_tokens"} & set(record.dimensions)


def test_meters_nest_and_an_inner_report_counts_in_every_enclosing_one() -> None:
    """A host's own meter around a block sees what the block's inner meters see."""
    with metered() as outer:
        report_model_usage(ModelUsage(input_tokens=1, output_tokens=1))
        with metered() as inner:
            assert current_meter() is inner
            report_model_usage(ModelUsage(input_tokens=10, output_tokens=10))
        assert current_meter() is outer
    assert (inner.calls, inner.input_tokens) == (1, 10)
    assert (outer.calls, outer.input_tokens) == (2, 11)


async def test_concurrent_invocations_keep_their_own_usage() -> None:
    """Two invocations on one Retriever and one model never mix their figures."""
    model = _MeteredModel()
    retriever, audit = _retriever(model)
    with metered() as host:
        await asyncio.gather(
            retriever.retrieve(make_context(correlation_id="a"), "leave"),
            retriever.retrieve(make_context(correlation_id="b"), "leave"),
        )
    records = {r.correlation_id: r for r in audit.events(AuditEvent.RETRIEVE)}
    assert records["a"].dimensions["model_calls"] == 4
    assert records["b"].dimensions["model_calls"] == 4
    assert host.calls == 8
