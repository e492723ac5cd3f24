"""``ExplainService`` refuses to explain a caller no trusted issuer's token could make.

Every front door (the admin API, the portal, ``esra explain``, an embedder's own) reaches
the one service, so the rule is there: a caller holding a reserved ``esra.`` claim, a tenant
claim naming another tenant, or a value with control characters is ``ESRA_INVALID_REQUEST``
before any stage runs — and the refusal is audited without the request's text.
"""

from __future__ import annotations

from typing import Any

import pytest

from esra.core._admin.explaining import ExplainRequest, ExplainService
from esra.core._context import CallerIdentity, ClaimValue
from esra.core.admin import Administrator, Grant, NotPermittedError, Role
from esra.core.codes import AuditEvent
from esra.core.exceptions import InvalidRequestError
from esra.core.testing import FakeClock, InMemoryAuditSink
from tests.core.factories import SLUG, TENANT

pytestmark = pytest.mark.asyncio

TENANT_CLAIM = "esra_tenant"
OPERATOR = Administrator.of("ops", Grant(Role.ESRA_EXPOSURE_MANAGE, TENANT))


class RecordingRetriever:
    """Stands in for the pipeline: a refused request must never reach it."""

    def __init__(self) -> None:
        self.runs = 0

    async def explain(self, *_args: Any, **_kwargs: Any) -> Any:
        self.runs += 1
        raise AssertionError("the explained search ran")


def _service() -> tuple[ExplainService, InMemoryAuditSink, RecordingRetriever]:
    audit = InMemoryAuditSink()
    retriever = RecordingRetriever()
    retrievers: Any = {TENANT: retriever}
    service = ExplainService(
        retrievers, audit=audit, clock=FakeClock(), tenant_claims=(TENANT_CLAIM,)
    )
    return service, audit, retriever


def _request(
    claims: dict[str, ClaimValue], *, subject: str = "alice", client_app: str = "app-1"
) -> ExplainRequest:
    return ExplainRequest(
        exposure=SLUG,
        request="why?",
        caller=CallerIdentity(subject=subject, claims=claims),
        client_app_id=client_app,
    )


@pytest.mark.parametrize(
    ("request_", "named"),
    [
        pytest.param(_request({TENANT_CLAIM: "tenant-other"}), TENANT_CLAIM, id="other-tenant"),
        pytest.param(_request({"esra.tenant_id": "tenant-other"}), "esra.", id="reserved"),
        pytest.param(_request({"esra.clearance": True}), "esra.", id="reserved-prefix"),
        pytest.param(_request({"region": "emea\x00"}), "region", id="nul"),
        pytest.param(_request({"region": ("emea", "\ud800")}), "region", id="surrogate"),
        pytest.param(_request({"level": 2**64}), "level", id="huge-integer"),
        pytest.param(_request({}, subject="alice\nexplained_subject=bob"), "subject", id="crlf"),
        pytest.param(_request({}, subject=""), "subject", id="empty-subject"),
        pytest.param(_request({}, client_app="app\x1b[2J"), "clientApp", id="escape-in-app"),
        pytest.param(_request({f"c{i}": "v" for i in range(1000)}), "64", id="many-claims"),
    ],
)
async def test_a_caller_no_token_could_make_is_refused_before_the_search(
    request_: ExplainRequest, named: str
) -> None:
    service, audit, retriever = _service()

    with pytest.raises(InvalidRequestError) as refused:
        await service.explain(OPERATOR, TENANT, request_)

    assert named in str(refused.value)
    assert retriever.runs == 0
    (record,) = audit.events(AuditEvent.EXPLAIN)
    assert record.outcome == "failed"
    assert record.reason == "ESRA_INVALID_REQUEST"
    # Recorded without the request's text: none of it is to be trusted.
    assert set(record.dimensions) == {"subject", "role"}


async def test_a_tenant_claim_naming_the_tenant_explained_on_is_a_real_callers() -> None:
    service, _, retriever = _service()

    with pytest.raises(AssertionError, match="ran"):
        await service.explain(OPERATOR, TENANT, _request({TENANT_CLAIM: TENANT, "n": 2**63 - 1}))

    assert retriever.runs == 1


async def test_who_may_not_explain_learns_nothing_of_the_request_and_it_is_not_recorded() -> None:
    service, audit, retriever = _service()
    reader = Administrator.of("reader", Grant(Role.ESRA_DATA_READ, TENANT))

    with pytest.raises(NotPermittedError):
        await service.explain(reader, TENANT, _request({}, subject="alice\r\nforged=1"))

    assert retriever.runs == 0
    (record,) = audit.events(AuditEvent.EXPLAIN)
    assert record.outcome == "denied"
    assert "forged" not in repr(record.dimensions)
