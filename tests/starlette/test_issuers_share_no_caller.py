"""Two identity providers trusted for one tenant: the same ``sub`` from each is two callers.

OpenID Connect makes a subject unique only within its issuer. A reference surfaced to one
issuer's "alice" must not open for the other's, and neither may spend the other's hourly
fetch budget — through the real host, its token verification and the MCP client.
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent
from starlette.applications import Starlette

from esra.core._fetch.tokens import Keyring
from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeClock, FakeLanguageModel, InMemoryAuditSink
from esra.core.testing._provider import InMemorySearchProvider
from esra.starlette._app import create_app
from tests.starlette._tokens import AUDIENCE, NOW, idp, other_idp
from tests.starlette._world import ROWS, TENANT_A, mcp_client, snapshot_a


def _host(**options: Any) -> Starlette:
    return create_app(
        config=StaticConfigRepository([snapshot_a()]),
        providers={TENANT_A: {"s-1": InMemorySearchProvider({"m-s-1": ROWS[TENANT_A]})}},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        # A staff identity provider and a partner one, both trusted for tenant A.
        issuers=[idp().trusted(), other_idp().trusted(tenants=(TENANT_A,))],
        resource_url=AUDIENCE,
        keyring=Keyring.generate(),
        clock=FakeClock(NOW),
        **options,
    )


def _error(result: CallToolResult) -> str:
    assert result.is_error
    [content] = result.content
    assert isinstance(content, TextContent)
    return content.text


async def _first_ref(client: Any) -> str:
    found = await client.call_tool("esra_hr_search", {"prompt": "leave"})
    assert found.structured_content is not None
    ref: str = found.structured_content["results"][0]["documentRef"]
    return ref


async def test_a_reference_does_not_open_for_the_same_subject_of_another_issuer() -> None:
    app = _host()
    async with app.router.lifespan_context(app):
        async with mcp_client(app, idp().token(sub="alice")) as client:
            ref = await _first_ref(client)
            own = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})
        async with mcp_client(app, other_idp().token(sub="alice")) as client:
            replayed = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})

    assert not own.is_error
    assert _error(replayed) == "ESRA_DOCUMENT_NOT_FOUND: No such document."


async def test_the_same_subject_of_another_issuer_does_not_spend_the_fetch_budget() -> None:
    # Room for one fetch of a record, title and text (34–41 characters here), not two.
    app = _host(hourly_fetch_chars=60)
    async with app.router.lifespan_context(app):
        async with mcp_client(app, other_idp().token(sub="alice")) as client:
            ref = await _first_ref(client)
            spent = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})
            refused = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})
        async with mcp_client(app, idp().token(sub="alice")) as client:
            ref = await _first_ref(client)
            mine = await client.call_tool("esra_hr_search_fetch", {"documentRef": ref})

    assert not spent.is_error
    # The partner's "alice" has used her budget up; the staff "alice" still has all of hers.
    assert _error(refused).startswith("ESRA_FETCH_QUOTA_EXCEEDED")
    assert not mine.is_error
