"""A mandatory PostgreSQL source on a dead database: reported, and probed once, not per call.

Reproduces the review's attack: a host whose mandatory source pointed at a closed port
answered every one of its concurrent callers ``complete`` with no warning, and a login
outage made each concurrent caller wait out its own health probe. Here the real provider
and driver face a closed port and a server that accepts connections but never answers,
next to a healthy source on the live test server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs
import psycopg
import pytest

from esra.core._response import ResponseStatus, RetrievalResponse
from esra.core._retriever import Retriever
from esra.core.codes import WarningCode
from esra.core.config import BindingMode, SourceBinding, SourceHealth
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySecretStore,
    StaticHostAllowlist,
)
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.postgres import PostgresProvider
from tests.core.factories import make_capability, make_context, make_snapshot, make_source
from tests.postgres.conftest import make_provider, seed_contract

TENANT = CONTRACT_MAPPING.tenant_id
DEAD_NAME = "Orders database"
LIVE_NAME = "Articles database"
CALLERS = 32
# Only a safety net against a hang; nothing here depends on how long anything takes.
SAFETY_S = 60.0


@pytest.fixture
def seeded(pg_dsn: str, pg_schema: str) -> str:
    seed_contract(pg_dsn, pg_schema)
    return pg_schema


class Blackhole:
    """A TCP server that accepts every connection and never says a word (a login outage)."""

    def __init__(self) -> None:
        self.accepted = 0
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._hold, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.append(writer)

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def blackhole() -> AsyncIterator[tuple[Blackhole, int]]:
    server = Blackhole()
    port = await server.start()
    yield server, port
    await server.stop()


@pytest.fixture
def connect_attempts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the port of every connection the driver is asked to open."""
    original = psycopg.AsyncConnection.connect
    ports: list[int] = []

    async def spy(*args: Any, **kwargs: Any) -> Any:
        ports.append(int(kwargs.get("port", 0)))
        return await original(*args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", spy)
    return ports


def _dead_provider(port: int, **options: Any) -> PostgresProvider:
    return PostgresProvider(
        tenant_id=TENANT,
        connection=f"postgresql://esra_reader@127.0.0.1:{port}/orders",
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(TENANT, "127.0.0.1", port)]),
        mappings=(attrs.evolve(CONTRACT_MAPPING, id="m-dead", source_id="s-dead"),),
        **options,
    )


def _retriever(dead: PostgresProvider, live: PostgresProvider, **options: Any) -> Retriever:
    sources = [
        make_source("s-dead", tenant_id=TENANT, name=DEAD_NAME, provider_kind="postgres"),
        make_source("s-live", tenant_id=TENANT, name=LIVE_NAME, provider_kind="postgres"),
    ]
    bindings = [SourceBinding("s-dead", BindingMode.MANDATORY), SourceBinding("s-live")]
    snapshot = make_snapshot(
        sources,
        tenant_id=TENANT,
        mappings=[
            attrs.evolve(CONTRACT_MAPPING, id="m-dead", source_id="s-dead"),
            attrs.evolve(CONTRACT_MAPPING, id="m-live", source_id="s-live"),
        ],
        capability=make_capability(bindings, tenant_id=TENANT),
    )
    return Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-dead": dead, "s-live": live},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        # A clock that never moves: one probe's answer stands for the whole test.
        clock=FakeClock(),
        tenant_id=TENANT,
        **options,
    )


async def _call_concurrently(retriever: Retriever) -> list[RetrievalResponse]:
    async with asyncio.timeout(SAFETY_S):
        return await asyncio.gather(
            *(
                retriever.retrieve(
                    make_context(tenant_id=TENANT, claims={"org": "acme"}, correlation_id=f"c-{n}"),
                    "solar panel",
                )
                for n in range(CALLERS)
            )
        )


def _assert_reported(responses: list[RetrievalResponse]) -> None:
    for response in responses:
        assert response.status is ResponseStatus.DEGRADED
        assert [(w.code, w.message) for w in response.warnings] == [
            (
                WarningCode.ESRA_SOURCE_UNAVAILABLE,
                f"Source '{DEAD_NAME}' is unavailable and was not searched.",
            )
        ]
        assert response.results
        assert {r.source for r in response.results} == {LIVE_NAME}


async def test_a_mandatory_source_on_a_closed_port_degrades_every_call(
    pg_dsn: str, seeded: str, connect_attempts: list[int]
) -> None:
    """Every concurrent caller is told; the dead server is asked once, not once per call."""
    dead = _dead_provider(1)
    live = make_provider(pg_dsn, seeded)
    try:
        responses = await _call_concurrently(_retriever(dead, live))
    finally:
        await dead.close()
        await live.close()
    _assert_reported(responses)
    assert connect_attempts.count(1) == 1


async def test_a_login_outage_costs_one_bounded_probe(
    pg_dsn: str, seeded: str, blackhole: tuple[Blackhole, int]
) -> None:
    """A server that never completes the login is given up on after the probe timeout."""
    server, port = blackhole
    # The provider's own bound is left long, so the retriever's is the one that acts.
    dead = _dead_provider(port, health_timeout_s=60.0)
    live = make_provider(pg_dsn, seeded)
    try:
        responses = await _call_concurrently(_retriever(dead, live, health_probe_timeout_s=0.2))
    finally:
        await dead.close()
        await live.close()
    _assert_reported(responses)
    assert server.accepted == 1


async def test_the_provider_bounds_its_own_health_check(
    blackhole: tuple[Blackhole, int],
) -> None:
    """``health()`` itself answers UNAVAILABLE once its timeout passes, even without a caller's."""
    server, port = blackhole
    provider = _dead_provider(port, health_timeout_s=0.2)
    try:
        async with asyncio.timeout(SAFETY_S):
            assert await provider.health() is SourceHealth.UNAVAILABLE
    finally:
        await provider.close()
    assert server.accepted == 1


def test_a_health_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="health_timeout_s"):
        _dead_provider(1, health_timeout_s=0)
