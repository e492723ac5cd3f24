"""``[server] source_health_timeout_s`` / ``source_health_ttl_s`` reach every tenant's search.

A health answer is reused for its TTL: with ``health_ttl_s = 30`` a search 20 s after the
first asks the source nothing (the default 15 s would have asked again), one 40 s after it
does. The settings file's keys are forwarded by ``build_app`` to ``create_app``.
"""

from __future__ import annotations

from typing import Any

import pytest

from esra.core._config.source import SourceHealth
from esra.core._fetch.tokens import Keyring
from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeClock, FakeLanguageModel, InMemoryAuditSink
from esra.core.testing._provider import InMemorySearchProvider
from esra.starlette import _host as host_module
from esra.starlette._app import create_app
from esra.starlette._host import HostParts, build_app
from esra.starlette._settings import ServerSettings
from tests.starlette._tokens import AUDIENCE, NOW, idp
from tests.starlette._world import ROWS, TENANT_A, mcp_client, snapshot_a


class CountingHealth(InMemorySearchProvider):
    """Counts how often its health is asked."""

    def __init__(self) -> None:
        super().__init__({"m-s-1": list(ROWS[TENANT_A])})
        self.health_checks = 0

    async def health(self) -> SourceHealth:
        self.health_checks += 1
        return await super().health()


async def test_a_health_answer_is_reused_for_the_configured_ttl() -> None:
    provider = CountingHealth()
    clock = FakeClock(NOW)
    app = create_app(
        config=StaticConfigRepository([snapshot_a()]),
        providers={TENANT_A: {"s-1": provider}},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        issuers=[idp().trusted()],
        resource_url=AUDIENCE,
        keyring=Keyring.generate(),
        clock=clock,
        health_ttl_s=30,
    )
    async with app.router.lifespan_context(app):
        checks = []
        for advance in (0, 20, 20):
            clock.advance(advance)
            async with mcp_client(app, idp().token(esra_tenant=TENANT_A)) as client:
                result = await client.call_tool("esra_hr_search", {"prompt": "leave policy"})
            assert not result.is_error
            checks.append(provider.health_checks)
    assert checks == [1, 1, 2]


def test_build_app_forwards_the_server_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def capture(**kwargs: Any) -> object:
        seen.update(kwargs)
        return object()

    monkeypatch.setattr(host_module, "create_app", capture)
    server = ServerSettings(health_probe_timeout_s=0.5, health_ttl_s=45)
    parts = HostParts(
        config=StaticConfigRepository([snapshot_a()]),
        providers={},
        issuers=(),
        keyring=Keyring.generate(),
        model=FakeLanguageModel(),
        server=server,
    )
    build_app(parts, host="127.0.0.1", port=8000)
    assert (seen["health_probe_timeout_s"], seen["health_ttl_s"]) == (0.5, 45)
