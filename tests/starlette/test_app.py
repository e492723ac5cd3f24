"""create_app over HTTP: 401 with WWW-Authenticate, RFC 9728 metadata, health, Host checks."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeLanguageModel, InMemoryAuditSink
from esra.starlette._app import create_app, metadata_path
from tests.starlette._tokens import (
    AUDIENCE,
    ISSUER,
    NOW,
    OTHER_ISSUER,
    idp,
    other_idp,
    unsigned,
)
from tests.starlette._world import TENANT_B, http, open_world

METADATA_URL = "https://esra.example.test/.well-known/oauth-protected-resource/mcp"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}

REFUSED: dict[str, Callable[[], str | None]] = {
    "no token": lambda: None,
    "alg none": lambda: unsigned({"alg": "none"}, idp().claims()),
    "HS256 keyed with the public key": lambda: idp().hs256_with_public_key(),
    "expired": lambda: idp().token(exp=int(NOW.timestamp()) - 3600),
    "unknown issuer": lambda: idp().token(iss="https://evil.example/"),
    "wrong audience": lambda: idp().token(aud="https://elsewhere.example/mcp"),
    "missing tenant": lambda: idp().token(esra_tenant=None),
    "garbage": lambda: "garbage",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_a_refused_bearer_gets_401_with_www_authenticate(case: str) -> None:
    """Every refused or missing token: 401, invalid_token, pointing at the metadata."""
    async with open_world() as world, http(world.app, REFUSED[case]()) as client:
        response = await client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge
    assert "Traceback" not in response.text


async def test_a_valid_bearer_is_served() -> None:
    """The same request with a valid token is answered (the control for the 401 cases)."""
    async with open_world() as world, http(world.app, idp().token()) as client:
        response = await client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert response.status_code == 200
    assert response.json()["result"]["serverInfo"]["name"] == "esra"


async def test_protected_resource_metadata_is_served_per_rfc_9728() -> None:
    """The metadata names the resource, every trusted issuer verbatim and header bearers."""
    async with open_world() as world, http(world.app) as client:
        response = await client.get(metadata_path(AUDIENCE))
    assert response.status_code == 200
    assert response.json() == {
        "resource": AUDIENCE,
        "authorization_servers": [ISSUER, OTHER_ISSUER],
        "bearer_methods_supported": ["header"],
        "resource_name": "ESRA enterprise search",
    }


async def test_an_issuer_not_advertised_is_trusted_but_not_named() -> None:
    """A host serving several tenants need not publish each tenant's identity provider to
    anyone who asks: an issuer with ``advertised=False`` is left out of the metadata, and
    its tokens are served as before."""
    issuers = [idp().trusted(), other_idp().trusted(tenants=(TENANT_B,), advertised=False)]
    async with open_world(issuers=issuers) as world, http(world.app) as client:
        metadata = (await client.get(metadata_path(AUDIENCE))).json()
    assert metadata["authorization_servers"] == [ISSUER]
    assert OTHER_ISSUER not in json.dumps(metadata)
    token = other_idp().token(esra_tenant=TENANT_B)
    async with open_world(issuers=issuers) as world, http(world.app, token) as client:
        response = await client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert response.status_code == 200


async def test_with_no_issuer_advertised_the_metadata_names_none() -> None:
    """``authorization_servers`` is optional (RFC 9728 §2): omitted rather than empty."""
    issuers = [idp().trusted(advertised=False)]
    async with open_world(issuers=issuers) as world, http(world.app) as client:
        metadata = (await client.get(metadata_path(AUDIENCE))).json()
    assert "authorization_servers" not in metadata
    assert metadata["resource"] == AUDIENCE


async def test_health_needs_no_token_and_names_nothing() -> None:
    """/healthz answers without authentication and says only that the host is up."""
    async with open_world() as world, http(world.app) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_a_foreign_host_header_is_refused_on_loopback() -> None:
    """Bound to loopback, a request naming another Host is refused (DNS rebinding)."""
    async with open_world() as world, http(world.app, idp().token()) as client:
        response = await client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "attacker.example"}
        )
    assert response.status_code == 421


_HOST_CHECKED = (
    "/admin/v1/store",
    "/admin/v1/openapi.json",
    "/portal/",
    "/portal/sign-in",
    "/.well-known/oauth-protected-resource/mcp",
    "/no-such-route",
)


async def test_a_foreign_host_header_is_refused_on_every_route_on_loopback() -> None:
    """Issue 13 item 8: /admin/v1 and /portal answered any Host; now every route but
    /healthz refuses a foreign Host like /mcp does (421), token or not."""
    async with open_world() as world:
        for token in (None, idp().token(esra_roles=["ESRA_DATA_MANAGE"])):
            async with http(world.app, token) as client:
                for path in _HOST_CHECKED:
                    foreign = await client.get(path, headers={"Host": "attacker.example"})
                    assert foreign.status_code == 421, path
                    assert foreign.text == "Invalid Host header", path
                    own = await client.get(path)
                    assert own.status_code != 421, path
                posted = await client.put(
                    "/admin/v1/secrets/crm",
                    json={"value": "x"},
                    headers={"Host": "attacker.example:8000"},
                )
                assert posted.status_code == 421
                health = await client.get("/healthz", headers={"Host": "10.0.0.7:8000"})
                assert health.status_code == 200


async def test_configured_allowed_hosts_apply_to_admin_and_portal_too() -> None:
    """With ``allowed_hosts``, only those Host values reach the admin API and the portal."""
    app = create_app(
        config=StaticConfigRepository(),
        providers={},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        issuers=[idp().trusted()],
        resource_url=AUDIENCE,
        bind_host="0.0.0.0",  # noqa: S104 - the address is only named, nothing listens
        allowed_hosts=("esra.example.test", "esra.internal:*"),
    )
    async with app.router.lifespan_context(app), http(app) as client:
        for path in _HOST_CHECKED:
            for host in ("esra.example.test", "esra.internal:8443"):
                allowed = await client.get(path, headers={"Host": host})
                assert allowed.status_code != 421, (path, host)
            for host in ("127.0.0.1:8000", "esra.example.test.evil", "esra.example.test:81"):
                refused = await client.get(path, headers={"Host": host})
                assert refused.status_code == 421, (path, host)
        mcp = await client.post(
            "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "attacker.example"}
        )
        assert mcp.status_code == 421


def test_metadata_path_inserts_the_well_known_prefix() -> None:
    """RFC 9728 §3.1: the well-known segment goes before the resource's path."""
    assert metadata_path("https://h.example/mcp") == "/.well-known/oauth-protected-resource/mcp"
    assert metadata_path("https://h.example/") == "/.well-known/oauth-protected-resource"


def test_a_relative_resource_url_is_refused() -> None:
    """The resource URL must be absolute: it is what clients are told to request tokens for."""
    with pytest.raises(ValueError, match="absolute"):
        create_app(
            config=StaticConfigRepository(),
            providers={},
            model=FakeLanguageModel(),
            audit=InMemoryAuditSink(),
            issuers=[idp().trusted()],
            resource_url="/mcp",
        )
