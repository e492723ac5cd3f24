"""GET /lookups under hostile tenant choices: the acting tenant's lookups, or a refusal that
says nothing about the tenant named.

This host trusts its main issuer for every tenant and the other issuer for tenant B only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from esra.core._admin.lookups import client_applications
from esra.core.codes import AuditEvent
from tests.starlette._tokens import ISSUER, OTHER_ISSUER, idp, other_idp
from tests.starlette._world import TENANT_A, TENANT_B, snapshot_a
from tests.starlette.admin._host import ADMIN, AdminHost, open_admin_host, token


def _cross(claim: Any = (), *, own: Any = (), trusted_for_a: bool = True) -> str:
    """A tenant-B token whose cross-tenant roles claim holds ``claim`` as given."""
    issuer = idp() if trusted_for_a else other_idp()
    return issuer.token(
        sub="auditor", esra_tenant=TENANT_B, esra_roles=own, esra_cross_tenant_roles=claim
    )


async def _lookups(host: AdminHost, bearer: str, tenant: str | None) -> tuple[int, Any]:
    headers = {"ESRA-Tenant": tenant} if tenant is not None else {}
    async with host.client(bearer) as client:
        response = await client.get(f"{ADMIN}/lookups", headers=headers)
    return response.status_code, response.json()


async def test_a_cross_tenant_reader_sees_the_named_tenants_lookups_only(tmp_path: Path) -> None:
    """Tenant A's client applications and issuers — not the issuer trusted only for B, the
    reader's own tenant — and A's audit says who looked, from where."""
    async with open_admin_host(tmp_path) as host:
        status, body = await _lookups(host, _cross(["ESRA_DATA_READ"]), TENANT_A)
        assert status == 200
        assert body["clientApplications"] == list(client_applications(snapshot_a()))
        assert [i["issuer"] for i in body["trustedIssuers"]] == [ISSUER]
        (record,) = host.audit.events(AuditEvent.ADMIN_LOOKUPS_VIEW)
        assert (record.tenant_id, record.outcome) == (TENANT_A, "ok")
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == TENANT_B
        # At home the same token sees B's issuers, the B-only one included.
        _, at_home = await _lookups(host, _cross(own=["ESRA_DATA_READ"]), None)
        assert {i["issuer"] for i in at_home["trustedIssuers"]} == {ISSUER, OTHER_ISSUER}


@pytest.mark.parametrize(
    "bearer",
    [
        pytest.param(_cross(own=["ESRA_DATA_MANAGE"]), id="own-tenant roles only"),
        pytest.param(_cross(["ESRA_DATA_MANAGE"], trusted_for_a=False), id="issuer trusted for B"),
        pytest.param(
            _cross("ESRA_DATA_MANAGE", trusted_for_a=False), id="issuer trusted for B, one string"
        ),
        pytest.param(_cross(["esra_data_read"]), id="lower-case role"),
        pytest.param(_cross(["ESRA_DΑTA_READ"]), id="greek alpha"),
        pytest.param(_cross("ＥSRA_DATA_READ"), id="fullwidth E, one string"),
        pytest.param(_cross(["ESRA_DATA_READ "]), id="padded role"),
        pytest.param(_cross([["ESRA_DATA_READ"]]), id="nested list"),
        pytest.param(_cross({"ESRA_DATA_READ": True}), id="object"),
        pytest.param(_cross(["ESRA_DATA_READ", None]), id="list with null"),
        pytest.param(_cross("ESRA_DATA_READ,ESRA_DATA_MANAGE"), id="comma-joined"),
        pytest.param(_cross(None), id="null or absent"),
        pytest.param(_cross(["SECURITY_MANAGE", "GOVERNANCE_MANAGE"]), id="platform roles"),
    ],
)
async def test_no_grant_on_the_named_tenant_answers_alike_whether_it_exists_or_not(
    tmp_path: Path, bearer: str
) -> None:
    """403 exactly as a role-less caller at home, for a served tenant and an unknown one;
    neither tenant's draft is started."""
    async with open_admin_host(tmp_path) as host:
        baseline = await _lookups(host, token(), None)
        assert baseline[0] == 403
        assert await _lookups(host, bearer, TENANT_A) == baseline
        assert await _lookups(host, bearer, "tenant-zz") == baseline
        assert await _lookups(host, bearer, "TENANT-A") == baseline
        denied = host.audit.events(AuditEvent.ADMIN_LOOKUPS_VIEW)
        assert [r.outcome for r in denied] == ["denied"] * 4
        assert all(r.dimensions.get("operator_tenant") == TENANT_B for r in denied[1:])
        assert host.audit.events(AuditEvent.ADMIN_WORKSPACE_VIEW) == []
