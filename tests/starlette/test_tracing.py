"""Tracing through the host: the MCP server span (from the ``mcp`` SDK) takes its parent
from ``params._meta``, holds the pipeline's spans and names the tenant and correlation id;
the call's audit records name the trace; the response is byte-identical with tracing on."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from esra.core._audit.tracing import TRACE_ID
from esra.core._telemetry import CORRELATION_ID, TENANT_ID
from esra.core.codes import AuditEvent
from tests._telemetry import recording
from tests.starlette._tokens import idp
from tests.starlette._world import TENANT_A, http, open_world

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
PARENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"


def _call(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "esra_hr_search", "arguments": {"prompt": "leave policy"}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


async def test_the_call_span_continues_the_clients_trace_and_holds_the_pipeline() -> None:
    """``traceparent`` in ``_meta`` is honoured; ``esra.retrieve`` is the call span's child."""
    meta = {"traceparent": f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"}
    async with open_world() as world, http(world.app, idp().token()) as client:
        with recording() as recorded:
            response = await client.post("/mcp", json=_call(meta), headers=MCP_HEADERS)
        assert response.status_code == 200, response.text
        records = world.audit.records
    spans = recorded.spans()
    (call,) = [s for s in spans if s.name == "tools/call esra_hr_search"]
    assert format(call.context.trace_id, "032x") == PARENT_TRACE
    assert call.parent is not None
    assert format(call.parent.span_id, "016x") == PARENT_SPAN
    assert call.attributes is not None
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "esra_hr_search"
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["jsonrpc.request.id"] == "7"
    assert call.attributes[TENANT_ID] == TENANT_A
    (retrieve,) = [s for s in spans if s.name == "esra.retrieve"]
    assert retrieve.parent is not None
    assert retrieve.parent.span_id == call.context.span_id
    correlation = call.attributes[CORRELATION_ID]
    invocation = [r for r in records if r.correlation_id == correlation]
    assert {r.event for r in invocation} >= {AuditEvent.INVOKE, AuditEvent.RETRIEVE}
    assert {r.dimensions[TRACE_ID] for r in invocation} == {PARENT_TRACE}


async def test_the_response_is_byte_identical_with_tracing_on_and_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tracing observes; it never changes what the caller gets. Both calls run on one host
    under one correlation id; only what is random by design differs (result ids, and the
    encrypted document references' nonces), and is masked."""
    fixed = uuid.UUID(int=42)
    monkeypatch.setattr(uuid, "uuid4", lambda: fixed)
    async with open_world() as world, http(world.app, idp().token()) as client:
        off = await client.post("/mcp", json=_call(), headers=MCP_HEADERS)
        with recording() as recorded:
            on = await client.post("/mcp", json=_call(), headers=MCP_HEADERS)
    assert recorded.spans()
    assert _without_refs(on.content) == _without_refs(off.content)
    assert b"documentRef" in on.content


def _without_refs(body: bytes) -> bytes:
    body = re.sub(rb"r_[A-Za-z0-9_-]{12}", b"r_<id>", body)
    return re.sub(rb'(documentRef\\?": ?\\?")[^"\\]+', rb"\1<ref>", body)


async def test_only_a_tool_the_caller_was_offered_names_a_duration_series() -> None:
    """docs/observability.md: every metric attribute is drawn from a bounded set. A tool
    name the caller invents, well-formed or not, is one label, never a series of its own."""
    invented = [f"esra_made_up_{uuid.uuid4().hex[:12]}" for _ in range(3)]
    malformed = "esra hr search!"
    async with open_world() as world, http(world.app, idp().token()) as client:
        with recording() as recorded:

            def labels() -> set[Any]:
                # The reader keeps every series the process recorded, earlier tests' too.
                points = recorded.points("mcp.server.operation.duration")
                return {attributes.get("gen_ai.tool.name") for attributes, _ in points}

            before = labels()
            for name in [*invented, malformed, "esra_hr_search"]:
                call = _call()
                call["params"]["name"] = name
                response = await client.post("/mcp", json=call, headers=MCP_HEADERS)
                assert response.status_code == 200, response.text
            after = labels()
        assert world.audit.records  # the calls ran and were audited
    assert not after & {*invented, malformed}
    assert {"esra_hr_search", "(unknown)"} <= after
    assert after - before <= {"esra_hr_search", "(unknown)"}
