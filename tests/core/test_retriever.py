"""The Retriever end to end over in-memory ports: the stages composed as the spec orders them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import attrs
import pytest

from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._response import ResponseStatus
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode, ProviderErrorCode, WarningCode
from esra.core.config import (
    BindingMode,
    CapabilityLimits,
    MaskingKind,
    MaskingRule,
    Operator,
    RecordFilter,
    SourceBinding,
    SourceHealth,
)
from esra.core.exceptions import (
    EsraError,
    ExposureNotFoundError,
    InvalidRequestError,
    NoSourcesAvailableError,
)
from esra.core.ports import ProviderCapabilities
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import (
    make_capability,
    make_context,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

ROWS = {
    "m-s-1": [
        {
            "col_id": 1,
            "col_title": "Annual leave policy",
            "col_body": "Employees get 28 days leave",
        },
        {"col_id": 2, "col_title": "Travel policy", "col_body": "Book travel via the desk"},
    ],
    "m-s-2": [
        {
            "col_id": 10,
            "col_title": "Leave request form",
            "col_body": "Request leave two weeks ahead",
        },
    ],
}


def _retriever(
    *,
    model: FakeLanguageModel | None = None,
    providers: dict[str, object] | None = None,
    limits: CapabilityLimits | None = None,
    mappings: Sequence[object] | None = None,
) -> tuple[Retriever, InMemoryAuditSink, FakeLanguageModel]:
    sources = [make_source("s-1"), make_source("s-2")]
    capability = make_capability(["s-1", "s-2"])
    if limits is not None:
        capability = attrs.evolve(capability, limits=limits)
    snapshot = make_snapshot(
        sources,
        capability=capability,
        mappings=mappings,  # type: ignore[arg-type]
    )
    audit = InMemoryAuditSink()
    fake_model = model or FakeLanguageModel()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers=providers  # type: ignore[arg-type]
        or {"s-1": InMemorySearchProvider(ROWS), "s-2": InMemorySearchProvider(ROWS)},
        model=fake_model,
        audit=audit,
        clock=FakeClock(),
    )
    return retriever, audit, fake_model


async def test_a_question_flows_through_every_stage_to_ranked_results() -> None:
    """Selection, planning, execution, aggregation, rerank and response all run."""
    retriever, audit, model = _retriever()
    response = await retriever.retrieve(make_context(), "leave policy")
    assert response.status is ResponseStatus.COMPLETE
    assert response.warnings == ()
    titles = [r.title for r in response.results]
    assert "Annual leave policy" in titles
    assert "Leave request form" in titles
    assert {p.task for p in model.prompts} == {
        PromptTask.SELECT_SOURCES,
        PromptTask.PLAN_SEARCHES,
        PromptTask.RERANK,
    }
    events = [r.event for r in audit.records]
    assert events[0] is AuditEvent.SOURCES_RESOLVE
    assert events[-1] is AuditEvent.RETRIEVE
    assert all(r.tenant_id == "tenant-a" for r in audit.records)


async def test_results_are_deterministic_across_invocations() -> None:
    """The same question over the same data returns the same order (ids differ)."""
    retriever, _, _ = _retriever()
    first = await retriever.retrieve(make_context(), "leave policy")
    second = await retriever.retrieve(make_context(), "leave policy")
    assert [r.title for r in first.results] == [r.title for r in second.results]
    assert {r.result_id for r in first.results}.isdisjoint({r.result_id for r in second.results})


@pytest.mark.parametrize("request_text", ["", "   ", "x" * 4001])
async def test_an_empty_or_oversized_request_is_invalid(request_text: str) -> None:
    """Bad input gets a classified error before anything runs."""
    retriever, audit, model = _retriever()
    with pytest.raises(InvalidRequestError) as raised:
        await retriever.retrieve(make_context(), request_text)
    assert raised.value.code is ErrorCode.ESRA_INVALID_REQUEST
    assert model.prompts == []
    assert audit.records == []


async def test_a_tenant_without_configuration_sees_no_tool() -> None:
    """Another tenant's exposure is indistinguishable from a missing one."""
    retriever, _, model = _retriever()
    with pytest.raises(ExposureNotFoundError):
        await retriever.retrieve(make_context(tenant_id="tenant-b"), "leave")
    assert model.prompts == []


async def test_an_unavailable_source_is_not_searched() -> None:
    """A provider reporting UNAVAILABLE takes its source out of scope before any model call."""
    down = InMemorySearchProvider(ROWS, health=SourceHealth.UNAVAILABLE)
    up = InMemorySearchProvider(ROWS)
    retriever, _, model = _retriever(providers={"s-1": down, "s-2": up})
    response = await retriever.retrieve(make_context(), "leave")
    assert down.executed == []
    assert {r.source for r in response.results} == {"Source s-2"}
    assert "Source s-1" not in model.prompts[0].render()


async def test_every_source_unavailable_fails_the_invocation() -> None:
    """An empty effective scope is ESRA_NO_SOURCES_AVAILABLE."""
    down = InMemorySearchProvider(ROWS, health=SourceHealth.UNAVAILABLE)
    retriever, _, _ = _retriever(providers={"s-1": down})  # s-2 has no provider at all
    with pytest.raises(NoSourcesAvailableError):
        await retriever.retrieve(make_context(), "leave")


async def test_a_failing_source_degrades_the_response_but_others_answer() -> None:
    """One source's classified failure is a warning; the other source's results remain."""
    failing = InMemorySearchProvider(ROWS)
    failing.fail_with = ProviderErrorCode.AUTH_FAILED
    retriever, audit, _ = _retriever(
        providers={"s-1": failing, "s-2": InMemorySearchProvider(ROWS)}
    )
    response = await retriever.retrieve(make_context(), "leave")
    assert response.status is ResponseStatus.DEGRADED
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_SOURCE_FAILED]
    assert {r.source for r in response.results} == {"Source s-2"}
    failed = audit.events(AuditEvent.QUERY_FAILED)
    assert failed
    assert failed[0].reason == "AUTH_FAILED"


async def test_a_model_that_fails_everything_still_answers_through_fallbacks() -> None:
    """Selection, planning and rerank fallbacks each add their warning; results still come."""

    def broken(_prompt: Prompt) -> str:
        raise RuntimeError("model down")

    model = FakeLanguageModel(dict.fromkeys(PromptTask, broken))
    forced = make_capability(["s-1", "s-2"])
    forced = attrs.evolve(
        forced, bindings=(SourceBinding("s-1", BindingMode.MANDATORY), SourceBinding("s-2"))
    )
    snapshot = make_snapshot([make_source("s-1"), make_source("s-2")], capability=forced)
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS), "s-2": InMemorySearchProvider(ROWS)},
        model=model,
        audit=InMemoryAuditSink(),
        clock=FakeClock(),
    )
    response = await retriever.retrieve(make_context(), "annual leave policy")
    codes = {w.code for w in response.warnings}
    assert {
        WarningCode.ESRA_SELECTION_FALLBACK,
        WarningCode.ESRA_PLANNING_FALLBACK,
        WarningCode.ESRA_RERANK_FALLBACK,
    } <= codes
    assert response.status is ResponseStatus.DEGRADED
    assert response.results
    assert {r.source for r in response.results} == {"Source s-1"}


async def test_a_missing_claim_drops_the_source_and_is_audited() -> None:
    """Record-level security fails closed: no claim, no query against that source."""
    region = make_field("region", restricted=True, operators=[Operator.EQ])
    guarded = make_mapping(
        "m-s-1",
        source_id="s-1",
        fields=(make_field("title"), make_field("body"), region),
        record_filters=(RecordFilter(field="region", claim="region"),),
    )
    provider = InMemorySearchProvider(ROWS)
    retriever, audit, _ = _retriever(
        providers={"s-1": provider, "s-2": InMemorySearchProvider(ROWS)},
        mappings=[guarded, make_mapping("m-s-2", source_id="s-2")],
    )
    response = await retriever.retrieve(make_context(), "leave")
    assert provider.executed == []
    assert WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM in {w.code for w in response.warnings}
    assert audit.events(AuditEvent.SOURCE_DROPPED)


async def test_a_template_claim_the_caller_lacks_drops_the_source_and_is_audited() -> None:
    """A record-filter template fails closed exactly like a structured record filter."""
    region = make_field("region", restricted=True)
    guarded = make_mapping(
        "m-s-1",
        source_id="s-1",
        fields=(make_field("title"), make_field("body"), region),
        record_filter_template="region = {claim:region} OR region IS NULL",
    )
    provider = InMemorySearchProvider(ROWS)
    retriever, audit, _ = _retriever(
        providers={"s-1": provider, "s-2": InMemorySearchProvider(ROWS)},
        mappings=[guarded, make_mapping("m-s-2", source_id="s-2")],
    )
    response = await retriever.retrieve(make_context(), "leave")
    assert provider.executed == []
    assert WarningCode.ESRA_SOURCE_DROPPED_MISSING_CLAIM in {w.code for w in response.warnings}
    (dropped,) = audit.events(AuditEvent.SOURCE_DROPPED)
    assert dropped.dimensions["source_id"] == "s-1"
    assert {r.source for r in response.results} == {"Source s-2"}


async def test_masking_applies_to_returned_fields() -> None:
    """A masked field leaves the response masked."""
    email = make_field("email", searchable=False)
    mapping = make_mapping(
        "m-s-1",
        source_id="s-1",
        fields=(make_field("title"), make_field("body"), email),
        masking=(MaskingRule(field="email", kind=MaskingKind.EMAIL),),
    )
    rows = {
        "m-s-1": [
            {"col_id": 1, "col_title": "Leave", "col_body": "leave", "col_email": "ana@example.org"}
        ]
    }
    retriever, _, _ = _retriever(
        providers={"s-1": InMemorySearchProvider(rows), "s-2": InMemorySearchProvider(ROWS)},
        mappings=[mapping, make_mapping("m-s-2", source_id="s-2")],
    )
    response = await retriever.retrieve(make_context(), "leave")
    emails = [r.fields["email"] for r in response.results if "email" in r.fields]
    assert emails
    assert all("ana@example.org" not in e for e in emails)


class _HangingProvider(InMemorySearchProvider):
    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_the_invocation_deadline_returns_a_degraded_answer() -> None:
    """Past the capability's invocation timeout the caller gets a classified warning."""
    limits = CapabilityLimits(invocation_timeout_s=0.05, attempt_timeout_s=30.0)
    retriever, _, _ = _retriever(
        providers={"s-1": _HangingProvider(ROWS), "s-2": _HangingProvider(ROWS)}, limits=limits
    )
    response = await retriever.retrieve(make_context(), "leave")
    assert response.status is ResponseStatus.DEGRADED
    assert [w.code for w in response.warnings] == [WarningCode.ESRA_INVOCATION_DEADLINE]


class _BrokenCapabilities(InMemorySearchProvider):
    @property
    def capabilities(self) -> ProviderCapabilities:
        raise RuntimeError("secret-host.internal:5432 exploded")


async def test_an_unclassified_failure_becomes_esra_internal_without_detail() -> None:
    """Anything unexpected is ESRA_INTERNAL; the raw text never reaches the caller."""
    retriever, audit, _ = _retriever(
        providers={"s-1": _BrokenCapabilities(ROWS), "s-2": _BrokenCapabilities(ROWS)}
    )
    with pytest.raises(EsraError) as raised:
        await retriever.retrieve(make_context(), "leave")
    assert raised.value.code is ErrorCode.ESRA_INTERNAL
    assert "secret-host" not in str(raised.value)
    # The failed invocation is on the trail too, with its code and without the detail.
    [failed] = audit.events(AuditEvent.RETRIEVE)
    assert (failed.outcome, failed.reason) == ("failed", "ESRA_INTERNAL")
    assert "secret-host" not in repr(audit.records)


async def test_a_guessed_mapping_id_is_rejected_and_never_echoed_into_audit() -> None:
    """A planner naming a mapping outside the scope is rejected; its text is not recorded."""

    def guess(prompt: Prompt) -> str:
        query = {"mapping": "m-hidden-payroll", "strategy": "keyword", "optional_terms": ["x"]}
        return json.dumps({"queries": [query]})

    model = FakeLanguageModel({PromptTask.PLAN_SEARCHES: guess})
    retriever, audit, _ = _retriever(model=model)
    response = await retriever.retrieve(make_context(), "leave")
    assert WarningCode.ESRA_PLAN_REJECTED in {w.code for w in response.warnings}
    rejected = audit.events(AuditEvent.PLAN_REJECTED)
    assert rejected
    assert all(r.reason == "MAPPING_NOT_IN_SCOPE" for r in rejected)
    assert "m-hidden-payroll" not in repr(audit.records)


async def test_a_rerank_answer_naming_an_unissued_id_is_audited_and_ignored() -> None:
    """The reranker cannot introduce a result: unknown ids are dropped and audited."""

    def rerank_with_intruder(prompt: Prompt) -> str:
        scores = [{"id": item.tag, "score": 0.5} for item in prompt.reference]
        scores.append({"id": "r_forged", "score": 1.0})
        return json.dumps({"scores": scores})

    model = FakeLanguageModel({PromptTask.RERANK: rerank_with_intruder})
    retriever, audit, _ = _retriever(model=model)
    response = await retriever.retrieve(make_context(), "leave")
    assert "r_forged" not in {r.result_id for r in response.results}
    (record,) = audit.events(AuditEvent.LLM_UNKNOWN_RESULT_REJECTED)
    assert record.dimensions["count"] == 1
    assert "r_forged" not in repr(record)
