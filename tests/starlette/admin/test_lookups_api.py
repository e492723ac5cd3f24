"""GET /admin/v1/lookups: what an ESRA screen needs to name a model profile, a client
application or a trusted issuer — for the ESRA & Data roles, on the token's tenant only."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import httpx2
import pytest
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Mount

from esra.core._admin.lookups import HostLookups, IssuerLookup, ModelProfile, client_applications
from esra.core._static_config import StaticConfigRepository
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.starlette._admin import ADMIN_PATH, admin_app
from esra.starlette._auth import JwtVerifier
from tests.starlette._tokens import NOW, idp, other_idp
from tests.starlette._world import BASE, TENANT_A, TENANT_B, snapshot_a, snapshot_b
from tests.starlette.admin._host import token

URL = f"{BASE}{ADMIN_PATH}/lookups"
HOST = HostLookups(
    model_profiles=(ModelProfile("default", "openai", "gpt-4.1"),),
    trusted_issuers=(
        IssuerLookup("https://idp.example.test", ("esra",)),
        IssuerLookup("https://b-only.example.test", ("esra",), frozenset({TENANT_B})),
    ),
)


@contextlib.asynccontextmanager
async def _client(bearer: str, audit: InMemoryAuditSink) -> AsyncIterator[httpx2.AsyncClient]:
    config = StaticConfigRepository([snapshot_a(), snapshot_b()])
    admin = admin_app(
        config=config,
        publisher=config,
        stores={},
        audit=audit,
        clock=FakeClock(NOW),
        lookups=HOST,
    )
    verifier = JwtVerifier(
        [idp().trusted(), other_idp().trusted(tenants=(TENANT_B,))], clock=FakeClock(NOW)
    )
    app = Starlette(
        routes=[Mount(ADMIN_PATH, app=admin)],
        middleware=[Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier))],
    )
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app),
        base_url=BASE,
        headers={"Authorization": f"Bearer {bearer}"},
    ) as client:
        yield client


@pytest.mark.parametrize("role", ["ESRA_DATA_READ", "ESRA_DATA_MANAGE", "ESRA_EXPOSURE_MANAGE"])
async def test_each_esra_role_reads_its_tenants_lookups(role: str) -> None:
    audit = InMemoryAuditSink()
    async with _client(token(role), audit) as client:
        response = await client.get(URL)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["modelProfiles"] == [{"name": "default", "kind": "openai", "model": "gpt-4.1"}]
    assert body["clientApplications"] == list(client_applications(snapshot_a()))
    assert body["clientApplications"], "the fixture's configuration names client applications"
    # The issuer trusted only for tenant B is not tenant A's to name.
    assert body["trustedIssuers"] == [{"issuer": "https://idp.example.test", "audiences": ["esra"]}]
    [viewed] = [r for r in audit.records if r.event is AuditEvent.ADMIN_LOOKUPS_VIEW]
    assert (viewed.tenant_id, viewed.outcome, viewed.dimensions["subject"]) == (
        TENANT_A,
        "ok",
        "operator",
    )


async def test_tenant_b_sees_its_own_issuer_and_client_applications() -> None:
    async with _client(token("ESRA_DATA_READ", tenant=TENANT_B), InMemoryAuditSink()) as client:
        body = (await client.get(URL)).json()
    assert {i["issuer"] for i in body["trustedIssuers"]} == {
        "https://idp.example.test",
        "https://b-only.example.test",
    }
    assert body["clientApplications"] == list(client_applications(snapshot_b()))


@pytest.mark.parametrize("role", ["SECURITY_MANAGE", "GOVERNANCE_MANAGE"])
async def test_the_platform_roles_alone_do_not_carry_them(role: str) -> None:
    audit = InMemoryAuditSink()
    async with _client(token(role), audit) as client:
        response = await client.get(URL)
    assert response.status_code == 403
    [refused] = [r for r in audit.records if r.event is AuditEvent.ADMIN_LOOKUPS_VIEW]
    assert (refused.outcome, refused.reason) == ("denied", "role")


async def test_no_key_material_is_listed() -> None:
    async with _client(token("ESRA_DATA_READ"), InMemoryAuditSink()) as client:
        text = json.dumps((await client.get(URL)).json())
    for word in ("key", "jwks", "secret", "endpoint"):
        assert word not in text.lower()
