"""Issue 13 item 5: deeply nested JSON, and bodies sent by callers without the role.

``"[" * 100000`` to the admin API was a 500 ``ESRA_INTERNAL`` with a RecursionError in the
log, reachable without any role because bodies were parsed before the role check (a token
with no role got 422 schema details instead of 403). Roles are now checked before a body is
read, and the parse is depth-bounded.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from esra.core.codes import AuditEvent
from esra.starlette._bounded_json import MAX_JSON_DEPTH
from tests.starlette._world import BASE
from tests.starlette.admin._host import ADMIN, open_admin_host, token

DEEP = b"[" * 100_000
JSON = {"content-type": "application/json"}
# Each body endpoint, the role it needs and the audit event its denial is recorded under.
ENDPOINTS = (
    ("/secrets/crm", "SECURITY_MANAGE", AuditEvent.ADMIN_SECRET_WRITE),
    ("/sources/s-9", "ESRA_DATA_MANAGE", AuditEvent.ADMIN_SOURCE_MODEL),
    ("/capabilities/cap-9", "ESRA_DATA_MANAGE", AuditEvent.ADMIN_CAPABILITY_DEFINE),
    ("/access-policies/leave_search", "GOVERNANCE_MANAGE", AuditEvent.ADMIN_POLICY_AUTHOR),
    ("/exposures/leave_search", "ESRA_EXPOSURE_MANAGE", AuditEvent.ADMIN_EXPOSURE_BIND),
)


def _code(response: object) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]  # type: ignore[attr-defined]


def _nested(depth: int) -> bytes:
    return b'{"id": "cap-9", "name": "x", "bindings": ' + b"[" * depth + b"]" * depth + b"}"


async def test_deep_json_without_a_role_is_403_and_never_parsed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A token with no role sending ``"[" * 100000`` gets 403 on every body endpoint."""
    caplog.set_level(logging.DEBUG)
    async with open_admin_host(tmp_path) as host, host.client(token()) as nobody:
        for path, _role, _event in ENDPOINTS:
            response = await nobody.put(f"{ADMIN}{path}", content=DEEP, headers=JSON)
            assert _code(response) == (403, "ESRA_FORBIDDEN"), path
        denials = [
            (r.event, r.dimensions["subject"], r.reason)
            for r in host.audit.records
            if r.outcome == "denied"
        ]
    assert denials == [(event, "operator", "role") for _path, _role, event in ENDPOINTS]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_deep_json_with_the_role_is_a_classified_400_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With the role, the same body is 400 ``ESRA_INVALID_REQUEST`` naming the bound; nothing
    is logged as an error, and the host keeps answering."""
    caplog.set_level(logging.DEBUG)
    async with open_admin_host(tmp_path) as host:
        for path, role, _event in ENDPOINTS:
            async with host.client(token(role)) as admin:
                response = await admin.put(f"{ADMIN}{path}", content=DEEP, headers=JSON)
                assert _code(response) == (400, "ESRA_INVALID_REQUEST"), path
                message = response.json()["error"]["message"]
                assert f"at most {MAX_JSON_DEPTH}" in message, message
                assert (await admin.get(f"{ADMIN}/openapi.json")).status_code == 200
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "RecursionError" not in caplog.text
    assert "Traceback" not in caplog.text


async def test_depth_within_the_bound_is_parsed_and_beyond_it_refused(tmp_path: Path) -> None:
    """The bound is exact: ``MAX_JSON_DEPTH`` levels reach the schema check (422), one more
    is refused as a request (400)."""
    async with open_admin_host(tmp_path) as host, host.client(token("ESRA_DATA_MANAGE")) as admin:
        # The object itself is one level, so the bindings add MAX_JSON_DEPTH - 1.
        within = await admin.put(
            f"{ADMIN}/capabilities/cap-9", content=_nested(MAX_JSON_DEPTH - 1), headers=JSON
        )
        assert _code(within) == (422, "ESRA_CONFIGURATION_INVALID")
        beyond = await admin.put(
            f"{ADMIN}/capabilities/cap-9", content=_nested(MAX_JSON_DEPTH), headers=JSON
        )
        assert _code(beyond) == (400, "ESRA_INVALID_REQUEST")


async def test_a_schema_invalid_body_without_the_role_is_403_without_schema_details(
    tmp_path: Path,
) -> None:
    """A token with no role learns nothing of the document's shape: 403, not 422 details."""
    bad = {"id": "cap-9", "name": "x", "bindings": "everything"}
    async with open_admin_host(tmp_path) as host:
        for bearer in (token(), token("ESRA_DATA_READ"), token("SECURITY_MANAGE")):
            async with host.client(bearer) as client:
                response = await client.put(f"{ADMIN}/capabilities/cap-9", json=bad)
                assert _code(response) == (403, "ESRA_FORBIDDEN")
                assert "bindings" not in response.text
        async with host.client(token("ESRA_DATA_MANAGE")) as modeller:
            permitted = await modeller.put(f"{ADMIN}/capabilities/cap-9", json=bad)
    assert _code(permitted) == (422, "ESRA_CONFIGURATION_INVALID")
    assert "$.bindings" in permitted.json()["error"]["message"]


async def test_deep_json_to_mcp_is_a_parse_error_not_a_server_error(tmp_path: Path) -> None:
    """/mcp parses its own body (the MCP SDK, depth-bounded): a 400 JSON-RPC parse error."""
    headers = {**JSON, "Accept": "application/json, text/event-stream"}
    async with open_admin_host(tmp_path) as host, host.client(token()) as caller:
        response = await caller.post(f"{BASE}/mcp", content=DEEP, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
