"""Hostile input against the admin API's roles, tenants and audit (security review).

Every administrative attempt is audited with its actor and tenant, refusals included; a
role is granted only by its exact name; a secret value is never echoed back.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from esra.core._config.converter import CONVERTER
from esra.core.codes import AuditEvent
from tests.core.factories import make_capability
from tests.starlette._tokens import idp
from tests.starlette._world import TENANT_A
from tests.starlette.admin._host import ADMIN, open_admin_host, token

MODELLER = token("ESRA_DATA_MANAGE", subject="modeller")
GOVERNOR = token("GOVERNANCE_MANAGE", subject="governor")
SECURITY = token("SECURITY_MANAGE", subject="security")
PUBLISHER = token("ESRA_EXPOSURE_MANAGE", subject="publisher")


def _capability(capability_id: str) -> dict[str, Any]:
    body: dict[str, Any] = CONVERTER.unstructure(
        make_capability(["s-1"], capability_id=capability_id, name=f"cap {capability_id}")
    )
    del body["tenant_id"]
    return body


async def test_a_body_the_api_refuses_is_audited_as_rejected(tmp_path: Path) -> None:
    """A role holder's change refused before it reaches the core is still an audited attempt:
    a schema-invalid body, a body naming another id than its URL, a malformed If-Match."""
    async with open_admin_host(tmp_path) as host, host.client(MODELLER) as modeller:
        bad_schema = await modeller.put(f"{ADMIN}/capabilities/cap-9", json={"id": 5})
        other_id = await modeller.put(f"{ADMIN}/capabilities/cap-9", json=_capability("cap-1"))
        bad_version = await modeller.put(
            f"{ADMIN}/capabilities/cap-9", json=_capability("cap-9"), headers={"If-Match": '"x"'}
        )
        not_json = await modeller.put(
            f"{ADMIN}/capabilities/cap-9",
            content=b"{",
            headers={"content-type": "application/json"},
        )
    assert [r.status_code for r in (bad_schema, other_id, bad_version, not_json)] == [
        422,
        400,
        400,
        400,
    ]
    records = host.audit.events(AuditEvent.ADMIN_CAPABILITY_DEFINE)
    assert [r.outcome for r in records] == ["rejected"] * 4
    for record in records:
        assert record.tenant_id == TENANT_A
        assert record.dimensions["subject"] == "modeller"
        assert record.dimensions["capability_id"] == "cap-9"
        assert record.reason in {"ESRA_CONFIGURATION_INVALID", "ESRA_INVALID_REQUEST"}


async def test_a_refused_secret_body_is_audited_and_never_echoes_the_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A secret write refused for its body is audited; the value appears nowhere."""
    value = "hunter2-very-secret"
    caplog.set_level(logging.DEBUG)
    async with open_admin_host(tmp_path) as host, host.client(SECURITY) as security:
        refused = await security.put(f"{ADMIN}/secrets/crm", json={"value": value, "x": value})
        written = await security.put(f"{ADMIN}/secrets/crm", json={"value": value})
        async with host.client(token("ESRA_DATA_READ")) as reader:
            draft = await reader.get(f"{ADMIN}/config")
    assert (refused.status_code, written.status_code) == (400, 200)
    outcomes = [r.outcome for r in host.audit.events(AuditEvent.ADMIN_SECRET_WRITE)]
    assert outcomes == ["rejected", "ok"]
    for text in (refused.text, written.text, draft.text, caplog.text, repr(host.audit.records)):
        assert value not in text


@pytest.mark.parametrize(
    "claim",
    [
        ["esra_data_manage"],
        ["ESRA_DATA_MANAGE\u200b"],
        [" ESRA_DATA_MANAGE"],
        ["ESRA_DATA_MANAGE "],
        ["ＥＳＲＡ_DATA_MANAGE"],
        "ESRA_DATA_MANAGE,ESRA_DATA_READ",
        [["ESRA_DATA_MANAGE"]],
        {"role": "ESRA_DATA_MANAGE"},
        None,
    ],
)
async def test_a_role_is_granted_only_by_its_exact_name(tmp_path: Path, claim: object) -> None:
    """Case, whitespace, zero-width, full-width, nested, joined or null role claims grant
    nothing: the change is 403 and audited as denied."""
    bearer = idp().token(sub="mallory", esra_tenant=TENANT_A, esra_roles=claim)
    body = _capability("cap-9")
    async with open_admin_host(tmp_path) as host, host.client(bearer) as client:
        response = await client.put(f"{ADMIN}/capabilities/cap-9", json=body)
        draft = await client.get(f"{ADMIN}/config")
    assert response.status_code == 403
    assert draft.status_code == 403
    assert [r.outcome for r in host.audit.events(AuditEvent.ADMIN_CAPABILITY_DEFINE)] == ["denied"]


async def test_a_single_role_string_claim_grants_that_role(tmp_path: Path) -> None:
    """A role claim given as one string (not a list) is honoured for exactly that role."""
    bearer = idp().token(sub="reader", esra_tenant=TENANT_A, esra_roles="ESRA_DATA_READ")
    async with open_admin_host(tmp_path) as host, host.client(bearer) as client:
        assert (await client.get(f"{ADMIN}/config")).status_code == 200
        refused = await client.put(f"{ADMIN}/capabilities/cap-9", json={})
    assert refused.status_code == 403
    assert host.audit.events(AuditEvent.ADMIN_CAPABILITY_DEFINE)[0].outcome == "denied"


@pytest.mark.parametrize("named", ["Tenant-A", "TENANT-A", "tenant-a\u00a0", "tenant‐a"])
async def test_a_tenant_spelled_differently_is_another_tenant(tmp_path: Path, named: str) -> None:
    """An own-tenant grant never reaches a case, hyphen or space variant of its tenant id."""
    async with open_admin_host(tmp_path) as host, host.client(GOVERNOR) as governor:
        response = await governor.put(
            f"{ADMIN}/access-policies/hr_search",
            json={"slug": "hr_search", "capability_id": "cap-1"},
            headers=[(b"ESRA-Tenant", named.encode("utf-8"))],
        )
    assert response.status_code in {400, 403}
    assert all(r.outcome != "ok" for r in host.audit.events(AuditEvent.ADMIN_POLICY_AUTHOR))


async def test_store_management_by_a_caller_without_esra_roles_is_audited(
    tmp_path: Path,
) -> None:
    """A platform-role holder trying to enable the store is refused, and the refusal audited."""
    async with (
        open_admin_host(tmp_path, initialised=False) as host,
        host.client(GOVERNOR) as governor,
    ):
        response = await governor.post(f"{ADMIN}/store/enable")
    assert response.status_code == 403
    records = host.audit.events(AuditEvent.STORE_ENABLE)
    assert [(r.outcome, r.tenant_id) for r in records] == [("denied", TENANT_A)]


@pytest.mark.parametrize("initialised", [True, False])
async def test_store_actions_by_callers_without_esra_roles_are_audited(
    tmp_path: Path, initialised: bool
) -> None:
    """Upload, delete, download, release, re-index and settings attempted by a platform-role
    holder or a role-less token are each refused 403 — whatever the store's state, which
    they may not learn — and audited as denied on the tenant."""
    document = f"{ADMIN}/store/documents/no-such-document"
    attempts = [
        ("POST", f"{ADMIN}/store/initialise", AuditEvent.STORE_INITIALISE),
        ("POST", f"{ADMIN}/store/documents", AuditEvent.DOCUMENT_UPLOAD),
        ("DELETE", document, AuditEvent.DOCUMENT_DELETE),
        ("GET", f"{document}/download", AuditEvent.DOCUMENT_DOWNLOAD),
        ("POST", f"{document}/release", AuditEvent.DOCUMENT_RELEASE),
        ("POST", f"{document}/reindex", AuditEvent.DOCUMENT_REINDEX),
        ("PUT", f"{ADMIN}/store/settings", AuditEvent.STORE_CONFIGURE),
    ]
    async with open_admin_host(tmp_path, initialised=initialised) as host:
        for bearer in (SECURITY, token(subject="nobody")):
            async with host.client(bearer) as client:
                for method, url, _ in attempts:
                    response = await client.request(method, url, json={"quarantine": "index"})
                    assert response.status_code == 403, (method, url)
    for _, url, event in attempts:
        records = host.audit.events(event)
        assert [(r.outcome, r.tenant_id) for r in records] == [("denied", TENANT_A)] * 2, url


@pytest.mark.parametrize(
    ("path", "bearer", "body"),
    [
        (
            "/access-policies/hr_search",
            GOVERNOR,
            b'{"slug": "hr_search", "capability_id": "cap-1", '
            b'"allowed_client_apps": ["app-1"], "allowed_client_apps": null}',
        ),
        ("/secrets/crm", SECURITY, b'{"value": "first", "value": "second"}'),
        (
            "/access-policies/hr_search",
            GOVERNOR,
            b'{"slug": "hr_search", "capability_id": "cap-1", "tenant_id": "tenant-b", '
            b'"tenant_id": "tenant-a"}',
        ),
    ],
)
async def test_a_body_naming_one_key_twice_is_refused(
    tmp_path: Path, path: str, bearer: str, body: bytes
) -> None:
    """A key given twice is ambiguous (a reviewer, a proxy and the host may each read a
    different one): the change is refused 400, audited, and the draft stays as it was."""
    async with open_admin_host(tmp_path) as host, host.client(bearer) as client:
        response = await client.put(
            f"{ADMIN}{path}", content=body, headers={"content-type": "application/json"}
        )
        async with host.client(token("ESRA_DATA_READ")) as reader:
            version = (await reader.get(f"{ADMIN}/config")).json()["version"]
    assert (response.status_code, response.json()["error"]["code"]) == (
        400,
        "ESRA_INVALID_REQUEST",
    )
    assert "first" not in response.text
    assert version == 1
    assert [r.outcome for r in host.audit.records if r.event.value.startswith("esra.admin.")] == [
        "rejected",
        "ok",  # the reader's view of the draft
    ]
