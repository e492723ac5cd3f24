"""Cross-tenant operators through the admin API: the ESRA-Tenant header and the claim.

In this host only tenant A has a store. The main issuer speaks for every tenant; the other
issuer only for tenant B. So a tenant-B token from the main issuer with cross-tenant roles
may act on A, and the same roles from the other issuer may not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from starlette.types import Message

from esra.core._admin.roles import Grant, Role
from esra.core._audit.record import AuditRecord
from esra.core._docstore.management import DATA_READ, Operator
from esra.core.codes import AuditEvent
from esra.starlette._admin.operator import MAX_TENANT_CHARS, RoleClaims, grants_of
from esra.starlette._auth import AuthenticatedCaller
from tests.starlette._tokens import idp, other_idp
from tests.starlette._world import TENANT_A, TENANT_B
from tests.starlette.admin._host import ADMIN, AdminHost, files, open_admin_host, token

CLEAN = ("leave.txt", b"Leave policy: every employee has 28 days of paid leave.\n")
ON_A = {"ESRA-Tenant": TENANT_A}


def _cross(*roles: str, own: tuple[str, ...] = (), trusted_for_a: bool = True) -> str:
    """A tenant-B token holding ``roles`` with no tenant (and ``own`` on tenant B)."""
    issuer = idp() if trusted_for_a else other_idp()
    return issuer.token(
        sub="auditor",
        esra_tenant=TENANT_B,
        esra_roles=list(own),
        esra_cross_tenant_roles=list(roles),
    )


async def _answer(host: AdminHost, bearer: str, headers: dict[str, str], path: str) -> Any:
    async with host.client(bearer) as client:
        response = await client.get(f"{ADMIN}{path}", headers=headers)
    return response.status_code, response.json()


def _cross_records(host: AdminHost, event: AuditEvent) -> list[AuditRecord]:
    return [r for r in host.audit.events(event) if r.dimensions.get("cross_tenant") is True]


async def _seed(host: AdminHost) -> str:
    async with host.client(token("ESRA_DATA_MANAGE", subject="owner")) as owner:
        uploaded = await owner.post(f"{ADMIN}/store/documents", files=files(CLEAN))
    await host.index()
    document_id: str = uploaded.json()["files"][0]["documentId"]
    return document_id


async def test_a_cross_tenant_reader_reads_another_tenants_store_and_is_audited(
    tmp_path: Path,
) -> None:
    """Tenant B's auditor lists and opens A's documents; A's audit says who, from where."""
    async with open_admin_host(tmp_path) as host:
        document_id = await _seed(host)
        async with host.client(_cross("ESRA_DATA_READ")) as auditor:
            status = await auditor.get(f"{ADMIN}/store", headers=ON_A)
            listed = await auditor.get(f"{ADMIN}/store/documents", headers=ON_A)
            one = await auditor.get(f"{ADMIN}/store/documents/{document_id}", headers=ON_A)
            at_home = await auditor.get(f"{ADMIN}/store")
        assert status.status_code == 200
        assert status.json()["counts"]["indexed"] == 1
        assert [d["id"] for d in listed.json()["documents"]] == [document_id]
        assert one.status_code == 200
        assert one.json()["downloadAvailable"] is False  # a reader may not download
        # Without the header it acts on its own tenant B: no store there.
        assert at_home.status_code == 404


async def test_a_cross_tenant_reader_cannot_manage_and_the_denials_are_cross_tenant(
    tmp_path: Path,
) -> None:
    """Upload, delete and download in A are refused 403, each refusal audited under A with
    ``cross_tenant`` and the operator's home tenant."""
    async with open_admin_host(tmp_path) as host:
        document_id = await _seed(host)
        async with host.client(_cross("ESRA_DATA_READ")) as auditor:
            upload = await auditor.post(
                f"{ADMIN}/store/documents", files=files(CLEAN), headers=ON_A
            )
            delete = await auditor.delete(f"{ADMIN}/store/documents/{document_id}", headers=ON_A)
            download = await auditor.get(
                f"{ADMIN}/store/documents/{document_id}/download", headers=ON_A
            )
        assert [r.status_code for r in (upload, delete, download)] == [403, 403, 403]
        assert upload.json()["error"]["code"] == "ESRA_FORBIDDEN"
        counts = await host.store.documents.counts(_owner_of(host))
        assert sum(counts.values()) == 1
        for event in (
            AuditEvent.DOCUMENT_UPLOAD,
            AuditEvent.DOCUMENT_DELETE,
            AuditEvent.DOCUMENT_DOWNLOAD,
        ):
            (record,) = [r for r in host.audit.events(event) if r.outcome == "denied"]
            assert record.tenant_id == TENANT_A
            assert record.dimensions["operator"] == "auditor"
            assert record.dimensions["cross_tenant"] is True
            assert record.dimensions["operator_tenant"] == TENANT_B


def _owner_of(host: AdminHost) -> Operator:
    return Operator("test", host.store.lifecycle.tenant_id, frozenset({DATA_READ}))


async def test_a_cross_tenant_manager_acts_and_every_record_is_marked(tmp_path: Path) -> None:
    """Allowed actions are marked as well: the upload's records name the home tenant."""
    async with open_admin_host(tmp_path) as host:
        async with host.client(_cross("ESRA_DATA_MANAGE")) as operator:
            uploaded = await operator.post(
                f"{ADMIN}/store/documents", files=files(CLEAN), headers=ON_A
            )
        assert uploaded.status_code == 202
        (record,) = host.audit.events(AuditEvent.DOCUMENT_UPLOAD)
        assert (record.outcome, record.tenant_id) == ("ok", TENANT_A)
        assert record.dimensions["operator_tenant"] == TENANT_B
        assert _cross_records(host, AuditEvent.DOCUMENT_UPLOAD) == [record]


async def test_own_tenant_roles_with_the_header_answer_as_a_missing_role(
    tmp_path: Path,
) -> None:
    """Tenant B's manager naming tenant A gets exactly a role-less caller's answer, and A's
    store is not touched."""
    async with open_admin_host(tmp_path) as host:
        own_only = _cross(own=("ESRA_DATA_MANAGE",))
        roleless = await _answer(host, token(), {}, "/store")
        assert roleless[0] == 403
        assert await _answer(host, own_only, ON_A, "/store") == roleless
        assert await _answer(host, own_only, ON_A, "/store/documents") == roleless
        async with host.client(own_only) as client:
            refused = await client.post(
                f"{ADMIN}/store/documents", files=files(CLEAN), headers=ON_A
            )
        assert (refused.status_code, refused.json()) == roleless
        assert host.audit.events(AuditEvent.DOCUMENT_UPLOAD) == []


async def test_an_issuer_trusted_only_for_b_never_reaches_a(tmp_path: Path) -> None:
    """The other issuer speaks for tenant B only: its cross-tenant roles do nothing on A."""
    async with open_admin_host(tmp_path) as host:
        untrusted = _cross("ESRA_DATA_MANAGE", trusted_for_a=False)
        roleless = await _answer(host, token(), {}, "/store")
        assert await _answer(host, untrusted, ON_A, "/store") == roleless
        async with host.client(untrusted) as client:
            refused = await client.post(f"{ADMIN}/store/enable", headers=ON_A)
            config = await client.get(f"{ADMIN}/config", headers=ON_A)
        assert (refused.status_code, refused.json()) == roleless
        assert config.status_code == 403
        assert host.audit.events(AuditEvent.STORE_ENABLE) == []
        # On its own tenant B, where the issuer is trusted, the roles hold (B has no store).
        at_b = await _answer(host, untrusted, {"ESRA-Tenant": TENANT_B}, "/store")
        assert at_b[0] == 404


@pytest.mark.parametrize(
    "named",
    [
        "tenant-a\x01",
        "tenant\x7fa",
        "t" * 129,
        " tenant-a",
        "tenant-a ",
        "",
        "tenant-\xa0a",
    ],
)
async def test_a_malformed_tenant_header_is_refused_400(tmp_path: Path, named: str) -> None:
    """Control characters, overlong, padded or empty: 400 with a classified error."""
    async with open_admin_host(tmp_path) as host:
        app_headers = [(b"esra-tenant", named.encode("latin-1"))]
        status, body = await _raw_get(host, _cross("ESRA_DATA_READ"), app_headers)
        assert status == 400
        assert body["error"]["code"] == "ESRA_INVALID_REQUEST"
        assert "ESRA-Tenant" in body["error"]["message"]
        assert named.strip() not in body["error"]["message"] or not named.strip()


async def test_the_header_named_twice_is_refused(tmp_path: Path) -> None:
    """Two ESRA-Tenant headers are ambiguous: neither is chosen."""
    async with open_admin_host(tmp_path) as host:
        both = [(b"esra-tenant", TENANT_A.encode()), (b"esra-tenant", TENANT_B.encode())]
        status, body = await _raw_get(host, _cross("ESRA_DATA_READ"), both)
        assert (status, body["error"]["code"]) == (400, "ESRA_INVALID_REQUEST")


async def _raw_get(
    host: AdminHost, bearer: str, extra: list[tuple[bytes, bytes]]
) -> tuple[int, Any]:
    """GET /store through the ASGI app directly: an HTTP client refuses such headers."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/admin/v1/store",
        "raw_path": b"/admin/v1/store",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"authorization", f"Bearer {bearer}".encode()),
            *extra,
        ],
        "client": ("127.0.0.1", 1234),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await host.app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body)


async def test_an_unknown_tenant_looks_like_a_tenant_without_a_store(tmp_path: Path) -> None:
    """A cross-tenant reader naming a tenant the host does not serve gets today's 404."""
    async with open_admin_host(tmp_path) as host:
        no_store = await _answer(host, token("ESRA_DATA_READ", tenant=TENANT_B), {}, "/store")
        assert no_store[0] == 404
        reader = _cross("ESRA_DATA_READ")
        assert await _answer(host, reader, {"ESRA-Tenant": "tenant-zz"}, "/store") == no_store
        assert await _answer(host, reader, {"ESRA-Tenant": TENANT_B}, "/store") == no_store


async def test_the_config_api_honours_the_header_and_marks_its_records(tmp_path: Path) -> None:
    """GET /config of tenant A by tenant B's cross-tenant reader, audited as cross-tenant;
    tenant B's own-tenant reader naming A is refused as a role-less caller is."""
    async with open_admin_host(tmp_path) as host:
        async with host.client(_cross("ESRA_DATA_READ")) as auditor:
            viewed = await auditor.get(f"{ADMIN}/config", headers=ON_A)
        assert viewed.status_code == 200
        assert viewed.json()["configuration"]["tenant_id"] == TENANT_A
        (record,) = host.audit.events(AuditEvent.ADMIN_WORKSPACE_VIEW)
        assert (record.outcome, record.tenant_id) == ("ok", TENANT_A)
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == TENANT_B
        async with host.client(_cross(own=("ESRA_DATA_READ",))) as own_only:
            refused = await own_only.get(f"{ADMIN}/config", headers=ON_A)
        async with host.client(token()) as roleless:
            baseline = await roleless.get(f"{ADMIN}/config")
        assert (refused.status_code, refused.json()) == (baseline.status_code, baseline.json())
        denied = [
            r for r in host.audit.events(AuditEvent.ADMIN_WORKSPACE_VIEW) if r.outcome == "denied"
        ]
        assert [r.dimensions.get("cross_tenant") for r in denied] == [True, None]


def test_a_caller_built_without_its_issuer_s_trust_is_trusted_for_its_own_tenant_only() -> None:
    """Fail closed: forgetting the issuer's tenants never widens a cross-tenant grant."""
    caller = AuthenticatedCaller(
        issuer="https://login.example.test/",
        tenant_id=TENANT_B,
        client_app_id="app-1",
        subject="auditor",
        claims={"esra_cross_tenant_roles": ("ESRA_DATA_MANAGE",)},
    )
    assert caller.issuer_trusts(TENANT_B)
    assert not caller.issuer_trusts(TENANT_A)
    assert grants_of(caller, RoleClaims()) == frozenset({Grant(Role.ESRA_DATA_MANAGE, TENANT_B)})
    everywhere = attrs.evolve(caller, issuer_tenants=None)
    assert grants_of(everywhere, RoleClaims()) == frozenset({Grant(Role.ESRA_DATA_MANAGE, None)})


def test_the_cross_tenant_claim_is_configurable_and_the_roles_claim_stays_own_tenant() -> None:
    """A renamed claim is read; the roles claim never yields a grant beyond the home tenant."""
    caller = AuthenticatedCaller(
        issuer="https://login.example.test/",
        tenant_id=TENANT_B,
        client_app_id="app-1",
        subject="auditor",
        claims={"esra_roles": ("ESRA_DATA_MANAGE",), "ops_roles": "ESRA_DATA_READ"},
        issuer_tenants=None,
    )
    grants = grants_of(caller, RoleClaims(cross_tenant_roles="ops_roles"))
    assert grants == frozenset(
        {Grant(Role.ESRA_DATA_MANAGE, TENANT_B), Grant(Role.ESRA_DATA_READ, None)}
    )
    assert grants_of(caller, RoleClaims()) == frozenset({Grant(Role.ESRA_DATA_MANAGE, TENANT_B)})


async def test_store_settings_and_audit_honour_the_header(tmp_path: Path) -> None:
    """The settings endpoint reads the named tenant and marks a refused change; the audit
    endpoint decides on the named tenant's roles."""
    async with open_admin_host(tmp_path) as host:
        async with host.client(_cross("ESRA_DATA_READ", "GOVERNANCE_MANAGE")) as auditor:
            settings = await auditor.get(f"{ADMIN}/store/settings", headers=ON_A)
            change = await auditor.put(
                f"{ADMIN}/store/settings", json={"batchPerTenant": 3}, headers=ON_A
            )
            audit = await auditor.get(f"{ADMIN}/audit", headers=ON_A)
        async with host.client(_cross(own=("GOVERNANCE_MANAGE",))) as own_only:
            refused_audit = await own_only.get(f"{ADMIN}/audit", headers=ON_A)
        assert settings.status_code == 200
        assert change.status_code == 403
        (record,) = host.audit.events(AuditEvent.STORE_CONFIGURE)
        assert (record.outcome, record.tenant_id) == ("denied", TENANT_A)
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == TENANT_B
        # This host keeps no readable audit: permitted is 404, not permitted 403.
        assert audit.status_code == 404
        assert refused_audit.status_code == 403


async def test_the_openapi_document_names_the_header_on_every_operation(tmp_path: Path) -> None:
    """Clients learn of ESRA-Tenant from the document, with its bound."""
    async with open_admin_host(tmp_path) as host, host.client(None) as client:
        document = (await client.get(f"{ADMIN}/openapi.json")).json()
    operations = [op for item in document["paths"].values() for op in item.values()]
    assert operations
    for operation in operations:
        (header,) = [p for p in operation["parameters"] if p["in"] == "header"]
        assert header["name"] == "ESRA-Tenant"
        assert header["schema"]["maxLength"] == MAX_TENANT_CHARS
