"""``POST /admin/v1/explain``: an operator runs a search as a named caller.

The explanation answers to ``ESRA_EXPOSURE_MANAGE`` on the acting tenant only: a caller
without it, and an operator of another tenant, get 403 before the body is read, and every
attempt is recorded as ``esra.explain``. The caller's claims decide as they would for the
caller itself (the payroll exposure's access policy needs a ``department`` claim).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from esra.core._explain import EXPLAIN_MARK, EXPLAINED_BY
from esra.core.codes import AuditEvent
from tests.starlette._world import TENANT_A, TENANT_B
from tests.starlette.admin._host import ADMIN, AdminHost, open_admin_host, token

OPERATOR = token("ESRA_EXPOSURE_MANAGE", subject="tuner")


def _body(exposure: str = "hr_search", **claims: Any) -> dict[str, Any]:
    return {
        "exposure": exposure,
        "arguments": {"prompt": "leave policy"},
        "caller": {"subject": "alice", "clientApp": "app-1", "claims": claims},
    }


async def _explain(
    host: AdminHost, bearer: str, body: object, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    async with host.client(bearer) as client:
        response = await client.post(f"{ADMIN}/explain", json=body, headers=headers or {})
    assert response.headers["content-type"].startswith("application/json")
    return response.status_code, response.json()


async def test_an_operator_sees_what_the_pipeline_decided(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path) as host:
        status, explained = await _explain(host, OPERATOR, _body())

    assert status == 200
    assert explained["tenantId"] == TENANT_A
    assert explained["status"] == "complete"
    events = [d["event"] for d in explained["decisions"]]
    assert events[0] == AuditEvent.SOURCES_RESOLVE.value
    assert events[-1] == AuditEvent.RETRIEVE.value
    assert {p["sourceId"] for p in explained["plans"]} == {"s-1"}
    assert all(q["rows"] is not None for q in explained["queries"])
    # No field shows the key column, so the keys are withheld, each record's its own.
    assert all(r["keyWithheld"] for r in explained["ranking"])
    assert len({r["key"] for r in explained["ranking"]}) == len(explained["ranking"])
    assert explained["ranking"]
    assert explained["stages"][0]["stage"] == "scope"
    (record,) = host.audit.events(AuditEvent.EXPLAIN)
    assert record.outcome == "ok"
    assert record.dimensions["subject"] == "tuner"
    rehearsed = [r for r in host.audit.records if r.correlation_id == explained["correlationId"]]
    assert rehearsed
    assert all(r.dimensions[EXPLAIN_MARK] is True for r in rehearsed)
    assert all(r.dimensions[EXPLAINED_BY] == "tuner" for r in rehearsed)


async def test_the_callers_claims_decide_as_for_the_caller(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path) as host:
        _, without = await _explain(host, OPERATOR, _body("payroll"))
        _, with_claim = await _explain(host, OPERATOR, _body("payroll", department="hr"))

    assert without["status"] == "error"
    assert without["error"] == "ESRA_EXPOSURE_NOT_FOUND"
    assert with_claim["status"] == "complete"


async def test_a_caller_without_the_role_is_refused_before_the_body_is_read(
    tmp_path: Path,
) -> None:
    async with open_admin_host(tmp_path) as host:
        for roles in (("ESRA_DATA_READ",), ("GOVERNANCE_MANAGE",), ()):
            status, answer = await _explain(host, token(*roles), {"not": "a valid body"})
            assert status == 403
            assert answer["error"]["code"] == "ESRA_FORBIDDEN"
        denied = host.audit.events(AuditEvent.EXPLAIN)

    assert [r.outcome for r in denied] == ["denied"] * 3
    assert all(r.tenant_id == TENANT_A for r in denied)


async def test_an_operator_of_another_tenant_is_refused(tmp_path: Path) -> None:
    other = token("ESRA_EXPOSURE_MANAGE", tenant=TENANT_B, subject="b-tuner")
    async with open_admin_host(tmp_path) as host:
        status, _ = await _explain(host, other, _body(), headers={"ESRA-Tenant": TENANT_A})
        # On its own tenant it explains its own tenant's search, never tenant A's.
        own_status, own = await _explain(host, other, _body())
        records = host.audit.events(AuditEvent.EXPLAIN)

    assert status == 403
    assert own_status == 200
    assert own["tenantId"] == TENANT_B
    assert len(own["ranking"]) == 1  # tenant B's one record, never tenant A's three
    assert [(r.tenant_id, r.outcome) for r in records] == [(TENANT_A, "denied"), (TENANT_B, "ok")]


async def test_a_malformed_body_is_a_classified_error_naming_the_problem(tmp_path: Path) -> None:
    bad_bodies = [
        ({**_body(), "extra": 1}, "Unknown field"),
        ({**_body(), "exposure": ""}, "exposure"),
        ({**_body(), "arguments": {"prompt": ""}}, "arguments"),
        ({**_body(), "caller": {"subject": "alice"}}, "caller.clientApp"),
        (_body(region={"nested": "object"}), "claim"),
        ({**_body(), "authorizedSources": "s-1"}, "authorizedSources"),
    ]
    async with open_admin_host(tmp_path) as host:
        for body, named in bad_bodies:
            status, answer = await _explain(host, OPERATOR, body)
            assert status == 400, body
            assert answer["error"]["code"] == "ESRA_INVALID_REQUEST"
            assert named in answer["error"]["message"], answer
