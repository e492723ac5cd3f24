"""Operator explain: what the pipeline decided, to an operator of the tenant only.

One explained invocation over two sources shows the scope funnel, the selection, every plan,
each validation verdict (a rejected plan with its reason code), the statements as rendered
with parameter names only, rows per query, the scores of the final order and each stage's
time; its audit records are marked as explained; the model sees exactly the prompts of an
ordinary invocation; and the service refuses a non-operator and another tenant's operator,
recording each refusal as ``esra.explain``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import attrs
import pytest

from esra.core._admin.explaining import EXPLAIN_ROLE, ExplainRequest, ExplainService
from esra.core._admin.roles import Administrator, Grant, NotPermittedError, Role
from esra.core._context import CallerIdentity
from esra.core._explain import EXPLAIN_MARK, EXPLAINED_BY
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent, ErrorCode
from esra.core.config import BindingMode, SourceBinding
from esra.core.ports import RenderedStatement
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import TENANT, make_capability, make_context, make_snapshot, make_source

ROWS = {
    "m-s-1": [{"col_id": 1, "col_title": "Annual leave policy", "col_body": "28 days leave"}],
    "m-s-2": [{"col_id": 10, "col_title": "Leave request form", "col_body": "Two weeks ahead"}],
}
STAGES = [
    "scope",
    "selection",
    "planning",
    "validation",
    "execution",
    "aggregation",
    "rerank",
    "respond",
    "answer",
]
CLAIM_SECRET = "claim-value-7f3a"


class RenderingProvider(InMemorySearchProvider):
    """An in-memory provider that also renders its statements, as the SQL providers do."""

    def render_statement(self, query: ValidatedQuery) -> RenderedStatement:
        return RenderedStatement(
            text=f"SELECT key FROM {query.mapping.id} WHERE terms = :terms LIMIT :row_limit",
            parameters=("row_limit", "terms"),
        )

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        return await super().execute(query, timeout_s=timeout_s)


def _retriever(
    model: FakeLanguageModel | None = None,
) -> tuple[Retriever, InMemoryAuditSink, FakeLanguageModel]:
    # Both sources mandatory: both are planned and searched whatever selection says.
    bindings = (
        SourceBinding("s-1", BindingMode.MANDATORY),
        SourceBinding("s-2", BindingMode.MANDATORY),
    )
    capability = attrs.evolve(make_capability(["s-1", "s-2"]), bindings=bindings)
    snapshot = make_snapshot([make_source("s-1"), make_source("s-2")], capability=capability)
    audit = InMemoryAuditSink()
    model = model or FakeLanguageModel()
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": RenderingProvider(ROWS), "s-2": InMemorySearchProvider(ROWS)},
        model=model,
        audit=audit,
        clock=FakeClock(),
    )
    return retriever, audit, model


async def test_an_explanation_shows_every_stage_decision_over_two_sources() -> None:
    retriever, _, _ = _retriever()
    explanation = await retriever.explain(make_context(), "leave policy", explained_by="op-1")

    assert explanation.status == "complete"
    assert explanation.error is None
    (scope,) = [d for d in explanation.decisions if d.event == AuditEvent.SOURCES_RESOLVE.value]
    # The funnel: the four levels, then health.
    for level in (
        "admitted_source_policy",
        "admitted_capability_binding",
        "admitted_exposure_subset",
        "admitted_runtime_authorization",
        "admitted_health",
    ):
        assert scope.dimensions[level] == 2
    assert any(d.event == AuditEvent.SOURCES_SELECT.value for d in explanation.decisions)
    assert {p.source_id for p in explanation.plans} == {"s-1", "s-2"}
    assert {v.outcome for v in explanation.validation} == {"accepted"}
    by_source = {q.source_id: q for q in explanation.queries}
    assert by_source["s-1"].statement is not None
    assert by_source["s-1"].statement.parameters == ("row_limit", "terms")
    # A provider that cannot render says so rather than inventing a statement.
    assert by_source["s-2"].statement is None
    assert by_source["s-1"].rows == 1
    assert by_source["s-2"].rows == 1
    assert explanation.candidates == 2
    assert [r.position for r in explanation.ranking] == [1, 2]
    # No field shows the key column, so no caller sees the keys: told apart, not shown.
    assert all(r.key_withheld and r.key.startswith("withheld:") for r in explanation.ranking)
    assert len({r.key for r in explanation.ranking}) == 2
    assert all(r.returned for r in explanation.ranking)
    assert all(r.final > 0 and r.weighted > 0 for r in explanation.ranking)
    assert [s.stage for s in explanation.stages] == STAGES
    # The invocation's own outcome record closes the decisions.
    assert explanation.decisions[-1].event == AuditEvent.RETRIEVE.value


async def test_a_rejected_plan_is_explained_with_its_reason_code() -> None:
    def guess(prompt: Prompt) -> str:
        query = {"mapping": "m-hidden-payroll", "strategy": "keyword", "optional_terms": ["x"]}
        return json.dumps({"queries": [query]})

    retriever, _, _ = _retriever(FakeLanguageModel({PromptTask.PLAN_SEARCHES: guess}))
    explanation = await retriever.explain(make_context(), "leave", explained_by="op-1")

    rejected = [v for v in explanation.validation if v.outcome == "rejected"]
    assert rejected
    assert {v.reason for v in rejected} == {"MAPPING_NOT_IN_SCOPE"}
    reasons = {d.reason for d in explanation.decisions if d.event == "esra.plan.rejected"}
    assert reasons == {"MAPPING_NOT_IN_SCOPE"}


async def test_the_explained_invocation_is_marked_in_the_audit_trail() -> None:
    retriever, audit, _ = _retriever()
    await retriever.retrieve(make_context(correlation_id="own"), "leave policy")
    await retriever.explain(make_context(correlation_id="rehearsed"), "leave", explained_by="op-1")

    own = [r for r in audit.records if r.correlation_id == "own"]
    rehearsed = [r for r in audit.records if r.correlation_id == "rehearsed"]
    assert own
    assert rehearsed
    assert all(EXPLAIN_MARK not in r.dimensions for r in own)
    assert all(r.dimensions[EXPLAIN_MARK] is True for r in rehearsed)
    assert all(r.dimensions[EXPLAINED_BY] == "op-1" for r in rehearsed)


async def test_the_model_sees_the_same_prompts_whether_explained_or_not() -> None:
    """Nothing of the explanation reaches a prompt: explaining changes no model input."""
    plain_retriever, _, plain = _retriever()
    explained_retriever, _, explained = _retriever()
    await plain_retriever.retrieve(make_context(), "leave policy")
    await explained_retriever.explain(make_context(), "leave policy", explained_by="op-1")
    for task in PromptTask:
        assert [_stable(p) for p in explained.prompts_for(task)] == [
            _stable(p) for p in plain.prompts_for(task)
        ]


def _stable(prompt: Prompt) -> str:
    """The prompt with its per-invocation random result ids replaced."""
    return re.sub(r"r_[\w-]{12}", "r_<id>", repr(prompt))


async def test_an_invocation_that_fails_is_explained_up_to_its_error() -> None:
    retriever, _, _ = _retriever()
    ctx = make_context(authorized_source_ids=())  # the platform authorizes no source
    explanation = await retriever.explain(ctx, "leave", explained_by="op-1")

    assert explanation.status == "error"
    assert explanation.error == ErrorCode.ESRA_NO_SOURCES_AVAILABLE.value
    (scope,) = explanation.decisions
    assert scope.dimensions["admitted_runtime_authorization"] == 0
    assert [s.stage for s in explanation.stages] == ["scope"]


def _service() -> tuple[ExplainService, InMemoryAuditSink]:
    retriever, _, _ = _retriever()
    audit = InMemoryAuditSink()
    return ExplainService({TENANT: retriever}, audit=audit, clock=FakeClock()), audit


def _request() -> ExplainRequest:
    caller = CallerIdentity(subject="alice", claims={"region": CLAIM_SECRET})
    return ExplainRequest(
        exposure="hr_search", request="leave policy", caller=caller, client_app_id="app-1"
    )


async def test_the_service_explains_to_an_operator_and_records_it() -> None:
    service, audit = _service()
    operator = Administrator.of("op-1", Grant(EXPLAIN_ROLE, TENANT), home_tenant_id=TENANT)
    explanation = await service.explain(operator, TENANT, _request())

    (record,) = audit.events(AuditEvent.EXPLAIN)
    assert record.outcome == "ok"
    assert record.dimensions["subject"] == "op-1"
    assert record.dimensions["explained_subject"] == "alice"
    assert record.dimensions["explained_correlation_id"] == explanation.correlation_id
    # A claim value is never recorded.
    assert CLAIM_SECRET not in repr(record)


@pytest.mark.parametrize(
    "operator",
    [
        # Roles that do not grant explaining.
        Administrator.of("reader", Grant(Role.ESRA_DATA_READ, TENANT), home_tenant_id=TENANT),
        Administrator.of("gov", Grant(Role.GOVERNANCE_MANAGE, TENANT), home_tenant_id=TENANT),
        # The right role, on another tenant.
        Administrator.of("other", Grant(EXPLAIN_ROLE, "tenant-b"), home_tenant_id="tenant-b"),
    ],
    ids=["data-reader", "governance", "other-tenant-operator"],
)
async def test_the_service_refuses_who_may_not_explain(operator: Administrator) -> None:
    service, audit = _service()
    with pytest.raises(NotPermittedError):
        await service.explain(operator, TENANT, _request())
    (record,) = audit.events(AuditEvent.EXPLAIN)
    assert record.outcome == "denied"
    assert record.reason == "role"
    assert record.tenant_id == TENANT
