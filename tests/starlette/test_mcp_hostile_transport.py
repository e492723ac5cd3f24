"""Hostile requests on the MCP endpoint's transport: what a review found, pinned.

ESRA serves ``/mcp`` stateless with JSON answers: one POSTed JSON-RPC message, one answer.
Two holes were found in the ``mcp`` SDK's handshake-era entry (requests without a modern
``MCP-Protocol-Version`` header), which the host now closes in front of it:

- ``GET /mcp`` opened a server-to-client SSE stream that nothing can ever write to (no
  session, no notifications) and that stayed open until the client left — one held stream,
  task and socket per request, as many as a caller cares to open; with ``Last-Event-ID`` it
  returned no response at all (the server then answers 500 and logs an error). A GET or any
  other method but POST is now 405 with ``Allow: POST``, as on the 2026-07-28 entry.
- A body that is JSON but not one JSON-RPC message (a batch, a missing ``jsonrpc``,
  ``params`` a list) was answered with the text of pydantic's ``ValidationError``: library
  type names, its version in a documentation URL, and a repr of the request. Such a body is
  now refused exactly as the 2026-07-28 entry refuses it, with fixed text; a body that is
  not JSON reads ``Parse error`` on both entries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette

from esra.core.codes import AuditEvent
from tests.starlette._tokens import idp
from tests.starlette._world import http, open_world

_LEGACY = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_MODERN_VERSION = "2026-07-28"
_MODERN = {**_LEGACY, "MCP-Protocol-Version": _MODERN_VERSION, "Mcp-Method": "tools/list"}

INVALID_BODY = {
    "code": -32600,
    "message": "Body must be a single JSON-RPC request or notification object",
}
PARSE_ERROR = {"code": -32700, "message": "Parse error"}


async def _first_answer(
    app: Starlette, method: str, headers: Mapping[str, str]
) -> list[MutableMapping[str, Any]]:
    """What ``app`` sends for one request, up to its complete answer or an opened stream.

    Run at the ASGI level, because an SSE stream never completes: the client disconnects as
    soon as the answer is complete, a stream has opened, or the app has returned.
    """
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[MutableMapping[str, Any]] = []
    answered = anyio.Event()
    requested = False

    async def receive() -> MutableMapping[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        streaming = message["type"] == "http.response.start" and any(
            value.startswith(b"text/event-stream") for _name, value in message["headers"]
        )
        complete = message["type"] == "http.response.body" and not message.get("more_body")
        if streaming or complete:
            answered.set()

    async def run() -> None:
        await app(scope, receive, send)
        answered.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await answered.wait()
        group.cancel_scope.cancel()
    return sent


@pytest.mark.parametrize(
    "headers",
    [
        {"Accept": "text/event-stream"},
        {"Accept": "text/event-stream", "Last-Event-ID": "1"},
        {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": "abc"},
    ],
    ids=["stream", "resume", "session id"],
)
async def test_a_get_on_the_mcp_endpoint_is_405_and_opens_no_stream(
    headers: dict[str, str],
) -> None:
    async with open_world() as world:
        token = {"Host": "127.0.0.1:8000", "Authorization": f"Bearer {idp().token()}"}
        sent = await _first_answer(world.app, "GET", {**token, **headers})
    assert sent, "no response at all"
    start = sent[0]
    assert start["type"] == "http.response.start"
    assert start["status"] == 405
    assert (b"allow", b"POST") in start["headers"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    assert json.loads(body)["error"]["code"] == -32600
    assert not world.audit.records


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "OPTIONS"])
async def test_every_method_but_post_is_405(method: str) -> None:
    async with open_world() as world, http(world.app, idp().token()) as client:
        response = await client.request(method, "/mcp", headers=_LEGACY)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == -32600


async def test_a_get_without_a_token_is_still_401_first() -> None:
    """Authentication comes before anything else the endpoint says."""
    async with open_world() as world, http(world.app) as client:
        response = await client.get("/mcp", headers={"Accept": "text/event-stream"})
    assert response.status_code == 401
    assert "WWW-Authenticate" in response.headers


NOT_ONE_MESSAGE: dict[str, str] = {
    "a batch": json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]),
    "an empty batch": "[]",
    "no jsonrpc member": json.dumps({"id": 1, "method": "tools/list"}),
    "params a list": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}),
    "method a number": json.dumps({"jsonrpc": "2.0", "id": 1, "method": 7}),
    "a bare string": '"tools/list"',
    "null": "null",
}

NOT_JSON: dict[str, str] = {
    "garbage": "not json",
    "empty": "",
    "nested past the parser's limit": "[" * 100_000 + "]" * 100_000,
    "truncated": '{"jsonrpc":"2.0","id":1,"method":"tools/li',
}


def _modern(body: str) -> str:
    """``body`` with the 2026-07-28 envelope in its params, where it has params to carry it."""
    try:
        message = json.loads(body)
    except ValueError:
        return body
    if isinstance(message, dict) and isinstance(message.get("params", {}), dict):
        envelope = {
            "io.modelcontextprotocol/protocolVersion": _MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        message["params"] = {**message.get("params", {}), "_meta": envelope}
    return json.dumps(message)


@pytest.mark.parametrize("case", sorted(NOT_ONE_MESSAGE))
async def test_a_body_that_is_not_one_json_rpc_message_gets_fixed_text(case: str) -> None:
    body = NOT_ONE_MESSAGE[case]
    async with open_world() as world, http(world.app, idp().token()) as client:
        legacy = await client.post("/mcp", content=body, headers=_LEGACY)
        modern = await client.post("/mcp", content=_modern(body), headers=_MODERN)
    assert legacy.status_code == 400
    assert legacy.json() == {"jsonrpc": "2.0", "id": None, "error": INVALID_BODY}
    for leaked in ("pydantic", "input_value", "JSONRPCRequest", "validation error"):
        assert leaked not in legacy.text.lower()
    # Both entries refuse such a body the same way.
    assert modern.status_code == 400
    assert modern.json()["error"] == INVALID_BODY
    assert not world.audit.records


@pytest.mark.parametrize("case", sorted(NOT_JSON))
async def test_a_body_that_is_not_json_reads_parse_error_on_both_entries(case: str) -> None:
    body = NOT_JSON[case]
    async with open_world() as world, http(world.app, idp().token()) as client:
        legacy = await client.post("/mcp", content=body, headers=_LEGACY)
        modern = await client.post("/mcp", content=body, headers=_MODERN)
    assert legacy.status_code == modern.status_code == 400
    assert legacy.json() == {"jsonrpc": "2.0", "id": None, "error": PARSE_ERROR}
    assert modern.json()["error"] == PARSE_ERROR


async def test_a_refusal_with_the_request_id_is_left_as_the_sdk_wrote_it() -> None:
    """Only the id-less transport refusals are rewritten: an answer to a request stays."""
    request = {"jsonrpc": "2.0", "id": 9, "method": "resources/list"}
    async with open_world() as world, http(world.app, idp().token()) as client:
        response = await client.post("/mcp", json=request, headers=_LEGACY)
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 9,
        "error": {"code": -32601, "message": "Method not found", "data": "resources/list"},
    }


# JSON-RPC: a request whose ``id`` is present is never a notification, and MCP allows only a
# string or an integer there. The handshake-era entry took every other id for a notification:
# 202, nothing run, and a client waiting for an answer that never comes.
BAD_IDS: dict[str, object] = {
    "null": None,
    "a fraction": 1.5,
    "a whole float": 1.0,
    "a bool": True,
    "an object": {"a": 1},
    "a list": [1],
}


@pytest.mark.parametrize("method", ["tools/list", "tools/call"])
@pytest.mark.parametrize("case", sorted(BAD_IDS))
async def test_a_request_with_an_id_mcp_does_not_allow_is_refused_on_both_entries(
    case: str, method: str
) -> None:
    params = {"name": "esra_hr_search", "arguments": {"prompt": "leave"}}
    body = json.dumps({"jsonrpc": "2.0", "id": BAD_IDS[case], "method": method, "params": params})
    modern_headers = {**_MODERN, "Mcp-Method": method}
    if method == "tools/call":
        modern_headers["Mcp-Name"] = "esra_hr_search"
    async with open_world() as world, http(world.app, idp().token()) as client:
        legacy = await client.post("/mcp", content=body, headers=_LEGACY)
        modern = await client.post("/mcp", content=_modern(body), headers=modern_headers)
    assert legacy.status_code == 400
    assert legacy.json() == {"jsonrpc": "2.0", "id": None, "error": INVALID_BODY}
    assert modern.status_code == 400
    assert modern.json()["error"] == INVALID_BODY
    assert not world.audit.events(AuditEvent.RETRIEVE)  # nothing was run for it


async def test_a_notification_and_a_clients_answer_are_still_accepted() -> None:
    """No ``id`` (a notification) or no ``method`` (the client answering the server): 202."""
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    answer = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
    async with open_world() as world, http(world.app, idp().token()) as client:
        for message in (notification, answer):
            accepted = await client.post("/mcp", json=message, headers=_LEGACY)
            assert accepted.status_code == 202, message
