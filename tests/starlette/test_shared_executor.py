"""One ``Executor`` per process, shared by every tenant (issue 14).

``create_app`` built a ``Retriever`` per tenant, each with its own ``Executor``, so the spec's
"per runtime instance" concurrency bound was multiplied by the number of tenants. Now every
tenant's searches and fetches run through one executor (given, or made once); its circuit
breakers stay per (tenant, source), so sharing it never lets one tenant's failing source
open another tenant's breaker for a source of the same id.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
import stamina

from esra.core._fetch.tokens import Keyring
from esra.core._pipeline import execution
from esra.core._pipeline.execution import Executor
from esra.core._pipeline.resilience import BreakerState
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core._static_config import StaticConfigRepository
from esra.core.codes import ProviderErrorCode
from esra.core.testing import FakeClock, FakeLanguageModel, InMemoryAuditSink
from esra.core.testing._provider import InMemorySearchProvider
from esra.starlette import _app as app_module
from esra.starlette._app import create_app
from tests.starlette._tokens import AUDIENCE, NOW, idp
from tests.starlette._world import ROWS, TENANT_A, TENANT_B, mcp_client, snapshot_a, snapshot_b


@pytest.fixture(autouse=True)
def _no_backoff() -> Any:
    stamina.set_testing(True, attempts=1)
    yield
    stamina.set_testing(False)


class GatedProvider(InMemorySearchProvider):
    """Counts the executions in flight; each waits for ``release`` before it answers."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        super().__init__({"m-s-1": list(rows)})
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def execute(self, query: ValidatedQuery, *, timeout_s: float) -> Sequence[ResultRow]:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        return await super().execute(query, timeout_s=timeout_s)


@contextlib.asynccontextmanager
async def _host(
    providers: Mapping[str, InMemorySearchProvider], executor: Executor | None
) -> AsyncIterator[Any]:
    app = create_app(
        config=StaticConfigRepository([snapshot_a(), snapshot_b()]),
        providers={tenant: {"s-1": provider} for tenant, provider in providers.items()},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        issuers=[idp().trusted()],
        resource_url=AUDIENCE,
        keyring=Keyring.generate(),
        clock=FakeClock(NOW),
        executor=executor,
    )
    async with app.router.lifespan_context(app):
        yield app


async def _search(app: Any, tenant: str) -> dict[str, Any]:
    async with mcp_client(app, idp().token(esra_tenant=tenant)) as client:
        result = await client.call_tool("esra_hr_search", {"prompt": "leave policy"})
    assert not result.is_error
    assert result.structured_content is not None
    output: dict[str, Any] = result.structured_content
    return output


async def test_two_tenants_share_the_instance_bound() -> None:
    """With an instance bound of one, tenant B's query waits while tenant A's holds the slot:
    the bound is the process's, not one per tenant."""
    providers = {tenant: GatedProvider(rows) for tenant, rows in ROWS.items()}
    executor = Executor(clock=FakeClock(NOW), instance_concurrency=1)
    async with _host(providers, executor) as app:
        first = asyncio.create_task(_search(app, TENANT_A))
        await asyncio.wait_for(providers[TENANT_A].started.wait(), timeout=60)
        second = asyncio.create_task(_search(app, TENANT_B))
        # B's search gets as far as the executor and waits there for A's slot.
        for _ in range(200):
            await asyncio.sleep(0)
        assert providers[TENANT_B].calls == 0
        providers[TENANT_A].release.set()
        providers[TENANT_B].release.set()
        found = await asyncio.wait_for(asyncio.gather(first, second), timeout=60)
    assert [r["title"] for r in found[1]["results"]] == ["Beta leave policy"]
    assert providers[TENANT_A].calls == providers[TENANT_B].calls == 1


async def test_create_app_makes_one_executor_for_every_tenant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ``executor=``, two tenants still get one executor between them."""
    made: list[Executor] = []

    class CountedExecutor(Executor):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            made.append(self)

    monkeypatch.setattr(app_module, "Executor", CountedExecutor)
    monkeypatch.setattr(execution, "Executor", CountedExecutor)
    providers = {tenant: InMemorySearchProvider({"m-s-1": rows}) for tenant, rows in ROWS.items()}
    async with _host(providers, None) as app:
        assert (await _search(app, TENANT_A))["results"]
        assert (await _search(app, TENANT_B))["results"]
    assert len(made) == 1


async def test_one_tenants_failing_source_never_opens_anothers_breaker() -> None:
    """A's source ``s-1`` fails until its breaker opens; B's source ``s-1`` is still served."""
    failing = InMemorySearchProvider({"m-s-1": ROWS[TENANT_A]})
    failing.fail_with = ProviderErrorCode.CONNECTION_REFUSED
    healthy = InMemorySearchProvider({"m-s-1": ROWS[TENANT_B]})
    executor = Executor(clock=FakeClock(NOW), breaker_threshold=1)
    async with _host({TENANT_A: failing, TENANT_B: healthy}, executor) as app:
        degraded = await _search(app, TENANT_A)
        served = await _search(app, TENANT_B)
    assert degraded["status"] == "degraded"
    assert executor.breaker("s-1", tenant_id=TENANT_A).state is BreakerState.OPEN
    assert executor.breaker("s-1", tenant_id=TENANT_B).state is BreakerState.CLOSED
    assert [r["title"] for r in served["results"]] == ["Beta leave policy"]
