"""Configuration through the admin API: the chain's roles, its errors, and live publication."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from esra.core._config.converter import CONVERTER
from esra.core.codes import AuditEvent
from tests.core.factories import make_exposure
from tests.starlette._tokens import idp
from tests.starlette._world import TENANT_A, mcp_client
from tests.starlette.admin._host import ADMIN, open_admin_host, token

READER = token("ESRA_DATA_READ", subject="reader")
GOVERNOR = token("GOVERNANCE_MANAGE", subject="governor")
PUBLISHER = token("ESRA_EXPOSURE_MANAGE", subject="publisher")
MODELLER = token("ESRA_DATA_MANAGE", subject="modeller")
SECURITY = token("SECURITY_MANAGE", subject="security")


def _exposure_body(slug: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = CONVERTER.unstructure(
        make_exposure(exposure_id=f"exp-{slug}", tenant_id=TENANT_A, slug=slug, **overrides)
    )
    del body["tenant_id"]  # the token's tenant is implied
    return body


async def test_the_draft_starts_as_the_running_configuration(tmp_path: Path) -> None:
    """GET /config shows version 1 with the exposures the host already serves."""
    async with open_admin_host(tmp_path) as host, host.client(READER) as reader:
        response = await reader.get(f"{ADMIN}/config")
    assert response.status_code == 200
    body = response.json()
    assert (body["version"], body["publishedVersion"]) == (1, 1)
    slugs = {e["slug"] for e in body["configuration"]["exposures"]}
    assert {"hr_search", "payroll", "partner_search", "draft"} <= slugs
    assert [s["writes"] for s in body["secrets"]] == [1]
    assert host.audit.events(AuditEvent.ADMIN_WORKSPACE_VIEW)[0].outcome == "ok"


async def test_a_new_tool_goes_through_each_role_and_is_listed_once_published(
    tmp_path: Path,
) -> None:
    """Policy (governance) → exposure (exposure manage) → publish; then MCP lists the tool."""
    policy = {"slug": "leave_search", "capability_id": "cap-1"}
    caller = idp().token(sub="alice")
    async with open_admin_host(tmp_path) as host:
        async with host.client(PUBLISHER) as publisher, host.client(GOVERNOR) as governor:
            early = await publisher.put(
                f"{ADMIN}/exposures/leave_search", json=_exposure_body("leave_search")
            )
            assert early.status_code == 422
            assert "no access policy" in early.json()["error"]["message"]
            wrong_role = await publisher.put(f"{ADMIN}/access-policies/leave_search", json=policy)
            assert wrong_role.status_code == 403
            authored = await governor.put(f"{ADMIN}/access-policies/leave_search", json=policy)
            assert authored.json()["version"] == 2
            bound = await publisher.put(
                f"{ADMIN}/exposures/leave_search", json=_exposure_body("leave_search")
            )
            assert bound.json()["version"] == 3
            async with mcp_client(host.app, caller) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
            assert "esra_leave_search" not in names  # a bound draft is not published yet
            published = await publisher.post(f"{ADMIN}/exposures/leave_search/publish")
            assert published.json() == {"version": 4, "publishedVersion": 4}
        async with mcp_client(host.app, caller) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"esra_leave_search", "esra_hr_search"} <= names
        events = [
            (r.event, r.outcome, r.dimensions["subject"])
            for r in host.audit.records
            if r.event.value.startswith("esra.admin.")
            and r.event is not AuditEvent.ADMIN_WORKSPACE_VIEW
        ]
        assert events == [
            (AuditEvent.ADMIN_EXPOSURE_BIND, "rejected", "publisher"),
            (AuditEvent.ADMIN_POLICY_AUTHOR, "denied", "publisher"),
            (AuditEvent.ADMIN_POLICY_AUTHOR, "ok", "governor"),
            (AuditEvent.ADMIN_EXPOSURE_BIND, "ok", "publisher"),
            (AuditEvent.ADMIN_EXPOSURE_PUBLISH, "ok", "publisher"),
        ]


async def test_bad_bodies_are_classified_with_the_path_of_the_problem(tmp_path: Path) -> None:
    """Ill-typed fields name their path; mismatched ids and foreign tenants are refused."""
    async with open_admin_host(tmp_path) as host:
        async with host.client(MODELLER) as modeller:
            typed = await modeller.put(
                f"{ADMIN}/capabilities/cap-9",
                json={"id": "cap-9", "name": "x", "bindings": "everything"},
            )
            assert typed.status_code == 422
            assert typed.json()["error"]["code"] == "ESRA_CONFIGURATION_INVALID"
            assert "$.bindings" in typed.json()["error"]["message"]
            mismatch = await modeller.put(
                f"{ADMIN}/capabilities/cap-9", json={"id": "cap-1", "name": "x", "bindings": []}
            )
            assert mismatch.json()["error"]["code"] == "ESRA_INVALID_REQUEST"
            not_json = await modeller.put(
                f"{ADMIN}/capabilities/cap-9",
                content=b"{not json",
                headers={"content-type": "application/json"},
            )
            assert not_json.json()["error"]["code"] == "ESRA_INVALID_REQUEST"
            as_text = await modeller.put(f"{ADMIN}/capabilities/cap-9", content=b"{}")
            assert as_text.status_code == 415
        async with host.client(GOVERNOR) as governor:
            foreign = await governor.put(
                f"{ADMIN}/access-policies/hr_search",
                json={"slug": "hr_search", "capability_id": "cap-1", "tenant_id": "tenant-b"},
            )
        assert foreign.status_code == 422
        assert "another tenant" in foreign.json()["error"]["message"]


async def test_secrets_are_written_by_security_only_and_never_shown(tmp_path: Path) -> None:
    """SECURITY_MANAGE writes a secret; the draft shows the reference and count, not the value."""
    async with open_admin_host(tmp_path) as host:
        async with host.client(MODELLER) as modeller:
            denied = await modeller.put(f"{ADMIN}/secrets/crm", json={"value": "s3cr3t-value"})
            assert denied.status_code == 403
        async with host.client(SECURITY) as security:
            for _ in range(2):
                written = await security.put(f"{ADMIN}/secrets/crm", json={"value": "s3cr3t-value"})
                assert written.status_code == 200
            extra = await security.put(f"{ADMIN}/secrets/crm", json={"value": "v", "x": 1})
            assert extra.status_code == 400
        async with host.client(READER) as reader:
            draft = (await reader.get(f"{ADMIN}/config")).text
        assert '"reference":"crm","writes":2' in draft.replace(" ", "")
        assert "s3cr3t-value" not in draft
