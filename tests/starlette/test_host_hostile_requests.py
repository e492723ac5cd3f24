"""Hostile requests on the MCP host's path before the pipeline: what a review found.

Each test reproduces a hole found by attacking the request path (authentication, tool
visibility, argument parsing, request guards) with hostile input, and pins its fix.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from esra.core.codes import AuditEvent
from esra.core.testing import InMemoryCache
from tests.starlette._tokens import idp
from tests.starlette._world import TENANT_A, http, open_world

# --- A tool argument that is not Unicode text -----------------------------------------------
#
# The ``mcp`` SDK serves protocol revision 2026-07-28 (chosen by the client's
# ``MCP-Protocol-Version`` header) through a second entry that parses the body with
# ``json.loads``, which accepts a lone surrogate escape (``"\ud800"``) the handshake-era entry's
# parser refuses. Such a string reached the core unchecked: a prompt failed deep in the
# pipeline (hashing it for the cache key) as an unclassified ESRA_INTERNAL with a traceback in
# the log and no record of the invocation's outcome, and a filter field name was copied into
# the esra.retrieve audit record (a PostgreSQL jsonb column cannot hold it). The host now
# refuses any argument text that is not Unicode as ESRA_INVALID_REQUEST, audited as rejected,
# before the pipeline runs.

_MODERN = "2026-07-28"
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": _MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
# Written as JSON text: a lone surrogate cannot be encoded by any JSON library's writer here.
_LONE = "\\ud800"

NOT_UNICODE: dict[str, tuple[str, str]] = {
    "prompt": ("esra_hr_search", f'{{"prompt":"leave {_LONE}"}}'),
    "filter field": (
        "esra_hr_search",
        f'{{"prompt":"leave","filters":[{{"field":"f{_LONE}","operator":"eq","value":"x"}}]}}',
    ),
    "filter value": (
        "esra_hr_search",
        f'{{"prompt":"leave","filters":[{{"field":"f","operator":"eq","value":"x{_LONE}"}}]}}',
    ),
    "filter list value": (
        "esra_hr_search",
        f'{{"prompt":"leave","filters":[{{"field":"f","operator":"in","value":["{_LONE}"]}}]}}',
    ),
    "documentRef": ("esra_hr_search_fetch", f'{{"documentRef":"AQ{_LONE}"}}'),
}


def _modern_call(tool: str, arguments_json: str) -> tuple[bytes, dict[str, str]]:
    """A 2026-07-28 ``tools/call`` POST: its body (arguments as raw JSON) and headers."""
    envelope = json.dumps({"_meta": _ENVELOPE, "name": tool})[:-1]
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
        f'{envelope},"arguments":{arguments_json}}}}}'
    )
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": _MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    return body.encode(), headers


def _holds_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, tuple | list):
        return any(_holds_lone_surrogate(item) for item in value)
    return False


async def test_a_modern_call_with_text_arguments_is_served() -> None:
    """The control for the cases below: the 2026-07-28 entry serves a plain call."""
    async with open_world() as world, http(world.app, idp().token()) as client:
        body, headers = _modern_call("esra_hr_search", '{"prompt":"leave"}')
        response = await client.post("/mcp", content=body, headers=headers)
    assert response.status_code == 200
    assert response.json()["result"].get("isError") is not True
    assert [r.outcome for r in world.audit.events(AuditEvent.INVOKE)] == ["ok"]


@pytest.mark.parametrize("case", sorted(NOT_UNICODE))
async def test_an_argument_that_is_not_unicode_text_is_refused_and_audited(case: str) -> None:
    tool, arguments = NOT_UNICODE[case]
    async with open_world(cache=InMemoryCache()) as world, http(world.app, idp().token()) as client:
        body, headers = _modern_call(tool, arguments)
        response = await client.post("/mcp", content=body, headers=headers)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("ESRA_INVALID_REQUEST: ")
    assert "\ud800" not in result["content"][0]["text"]
    invokes = world.audit.events(AuditEvent.INVOKE)
    assert [(r.outcome, r.reason) for r in invokes] == [("rejected", "ESRA_INVALID_REQUEST")]
    assert invokes[0].tenant_id == TENANT_A
    # Refused before the pipeline: nothing searched, fetched or recorded beyond the refusal.
    assert [r.event for r in world.audit.records] == [AuditEvent.INVOKE]
    assert not world.providers[TENANT_A].executed
    assert not any(
        _holds_lone_surrogate(value)
        for record in world.audit.records
        for value in record.dimensions.values()
    )


# --- A tools/call the SDK refuses as malformed is still audited -----------------------------
#
# docs/host.md: "Each call is one esra.invoke record … rejected for invalid arguments". A
# tools/call whose arguments are not an object (or which names no tool) was refused by the
# ``mcp`` SDK's own params validation (JSON-RPC -32602) before the host's handler ran, so the
# caller's call left no audit record at all. The refusal is unchanged — the same for every tool
# name, so it still tells nothing about which tools exist — and now audited like any refused
# call: ``denied`` for a tool the caller cannot see, ``rejected`` for one it can.

_LEGACY_HEADERS = {"Accept": "application/json, text/event-stream"}

MALFORMED_CALLS: dict[str, tuple[dict[str, Any], tuple[str, str, str]]] = {
    "arguments a list, visible tool": (
        {"name": "esra_hr_search", "arguments": ["leave"]},
        ("esra_hr_search", "rejected", "ESRA_INVALID_REQUEST"),
    ),
    "arguments a string, visible tool": (
        {"name": "esra_hr_search", "arguments": "leave"},
        ("esra_hr_search", "rejected", "ESRA_INVALID_REQUEST"),
    ),
    "arguments a list, tool the policy refuses": (
        {"name": "esra_payroll", "arguments": ["leave"]},
        ("esra_payroll", "denied", "ESRA_EXPOSURE_NOT_FOUND"),
    ),
    "arguments a list, no such tool": (
        {"name": "esra_nothing", "arguments": ["leave"]},
        ("esra_nothing", "denied", "ESRA_EXPOSURE_NOT_FOUND"),
    ),
    "no tool name": (
        {"arguments": {"prompt": "leave"}},
        ("(invalid)", "denied", "ESRA_EXPOSURE_NOT_FOUND"),
    ),
    "tool name not a string": (
        {"name": ["esra_hr_search"], "arguments": {"prompt": "leave"}},
        ("(invalid)", "denied", "ESRA_EXPOSURE_NOT_FOUND"),
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_CALLS))
async def test_a_call_the_sdk_refuses_as_malformed_is_audited(case: str) -> None:
    params, (tool, outcome, reason) = MALFORMED_CALLS[case]
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    async with open_world() as world, http(world.app, idp().token()) as client:
        response = await client.post("/mcp", json=request, headers=_LEGACY_HEADERS)
    # The protocol's answer is unchanged, and the same whichever tool was named.
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32602, "message": "Invalid request parameters", "data": ""},
    }
    invokes = world.audit.events(AuditEvent.INVOKE)
    assert [(r.dimensions["tool"], r.outcome, r.reason) for r in invokes] == [
        (tool, outcome, reason)
    ]
    assert invokes[0].tenant_id == TENANT_A
    assert invokes[0].dimensions["subject"] == "alice"
    assert [r.event for r in world.audit.records] == [AuditEvent.INVOKE]
    assert not world.providers[TENANT_A].executed


async def test_a_malformed_call_on_the_2026_entry_is_audited_too() -> None:
    async with open_world() as world, http(world.app, idp().token()) as client:
        body, headers = _modern_call("esra_hr_search", '["leave"]')
        response = await client.post("/mcp", content=body, headers=headers)
    assert response.json()["error"]["code"] == -32602
    invokes = world.audit.events(AuditEvent.INVOKE)
    assert [(r.outcome, r.reason) for r in invokes] == [("rejected", "ESRA_INVALID_REQUEST")]


class _DownAudit:
    """An audit sink that cannot write."""

    async def record(self, record: object) -> None:
        msg = "audit backend down at /var/lib/secret.db"
        raise RuntimeError(msg)


@pytest.mark.parametrize("tool", ["esra_hr_search", "esra_payroll"])
async def test_a_malformed_call_whose_audit_fails_is_esra_internal_without_detail(
    tool: str,
) -> None:
    """As for any call: no audit record, no answer but ESRA_INTERNAL's fixed text."""
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": tool, "arguments": ["leave"]},
    }
    async with open_world(audit=_DownAudit()) as world, http(world.app, idp().token()) as client:
        response = await client.post("/mcp", json=request, headers=_LEGACY_HEADERS)
    assert response.json()["error"] == {
        "code": -32603,
        "message": "ESRA_INTERNAL: The request could not be completed.",
    }
    assert "secret" not in response.text
