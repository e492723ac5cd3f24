"""A failure while listing tools reaches the client as ESRA_INTERNAL, never its detail.

host.md, Errors: "anything unclassified (the detail is logged, never returned)". A
``tools/call`` failure is a tool error; ``tools/list`` has no tool error to give, so it is a
JSON-RPC error with a fixed message. The trigger here is the ``ConfigRepository`` port: an
embedder's database-backed repository losing its connection.
"""

from __future__ import annotations

import logging

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR

from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.config import ConfigSnapshot
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemorySearchProvider,
)
from esra.starlette._app import create_app
from esra.starlette._auth import AuthenticatedCaller, current_caller
from esra.starlette._tools import EsraTools, TenantServices
from tests.starlette._tokens import AUDIENCE, NOW, idp
from tests.starlette._world import BASE, ROWS, TENANT_A, http, snapshot_a

DRIVER_TEXT = (
    'connection to server at "cfg-db.internal" (10.0.0.5), port 5432 failed: '
    'FATAL: password authentication failed for user "esra_host"'
)
INTERNAL = "ESRA_INTERNAL: The request could not be completed."
# The handshake era (initialize; the SDK's JSON-RPC dispatcher, which would put the
# exception's text on the wire) and the discovered modern one.
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])


class _FlakyConfig:
    """A ``ConfigRepository`` whose backing database goes away when ``down`` is set."""

    def __init__(self) -> None:
        self._inner = StaticConfigRepository([snapshot_a()])
        self.down = False

    async def snapshot(self, tenant_id: str) -> ConfigSnapshot | None:
        if self.down:
            raise OSError(DRIVER_TEXT)
        return await self._inner.snapshot(tenant_id)


def _assert_generic(error: MCPError) -> None:
    assert error.code == INTERNAL_ERROR
    assert error.message == INTERNAL
    assert error.data is None
    assert "cfg-db" not in repr(error.error)
    assert "esra_host" not in repr(error.error)


@MODES
async def test_a_failure_while_listing_tools_over_http_is_esra_internal(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the host's /mcp: the list works, then fails with the fixed text only."""
    config = _FlakyConfig()
    app = create_app(
        config=config,
        providers={TENANT_A: {"s-1": InMemorySearchProvider({"m-s-1": ROWS[TENANT_A]})}},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        issuers=[idp().trusted()],
        resource_url=AUDIENCE,
        keyring=Keyring.generate(),
        clock=FakeClock(NOW),
    )
    async with (
        app.router.lifespan_context(app),
        http(app, idp().token()) as transport,
        Client(streamable_http_client(f"{BASE}/mcp", http_client=transport), mode=mode) as client,
    ):
        assert [tool.name for tool in (await client.list_tools()).tools]  # the control
        config.down = True
        with caplog.at_level(logging.ERROR, logger="esra.starlette._tools"):
            with pytest.raises(MCPError) as refused:
                await client.list_tools()
            called = await client.call_tool("esra_hr_search", {"prompt": "leave"})
    _assert_generic(refused.value)
    # tools/call answers the same failure as a tool error with the same text.
    assert called.is_error
    assert [part.text for part in called.content if part.type == "text"] == [INTERNAL]
    # The detail is logged for the operator.
    logged = [r for r in caplog.records if r.name == "esra.starlette._tools"]
    assert any(r.exc_info and DRIVER_TEXT in str(r.exc_info[1]) for r in logged)


@MODES
async def test_a_failure_while_listing_tools_in_process_is_esra_internal(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The low-level server itself (any transport) answers the fixed text."""
    config = _FlakyConfig()
    audit = InMemoryAuditSink()
    retriever = Retriever(
        config=config,
        providers={"s-1": InMemorySearchProvider({})},
        model=FakeLanguageModel(),
        audit=audit,
        tenant_id=TENANT_A,
    )
    tools = EsraTools(
        config=config, tenants={TENANT_A: TenantServices(retriever=retriever)}, audit=audit
    )
    caller = AuthenticatedCaller(
        tenant_id=TENANT_A, subject="u-1", issuer="https://idp", client_app_id="app-1"
    )
    monkeypatch.setattr("esra.starlette._tools.current_caller", lambda: caller)
    assert current_caller() is None  # only the module's own lookup is replaced
    config.down = True
    async with Client(tools.server(), mode=mode) as client:
        with pytest.raises(MCPError) as refused:
            await client.list_tools()
    _assert_generic(refused.value)
