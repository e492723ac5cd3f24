"""Two tenants behind one host, reached over HTTP through the ASGI transport.

Tenant A publishes ``hr_search`` (with fetch), ``payroll`` (its access policy requires a
``department`` claim), ``partner_search`` (audience ``app-2`` only) and an unpublished
``draft``. Tenant B publishes its own ``hr_search`` over its own rows. Callers come from the
test issuers in ``_tokens``: ``idp()`` may speak for any tenant, ``other_idp()`` for B only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import attrs
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from esra.core._fetch.tokens import Keyring
from esra.core._static_config import StaticConfigRepository
from esra.core.config import AccessPolicy, ConfigSnapshot, Exposure
from esra.core.ports import AuditSink, Cache
from esra.core.testing import FakeClock, FakeLanguageModel, InMemoryAuditSink
from esra.core.testing._provider import InMemorySearchProvider
from esra.starlette._app import create_app
from esra.starlette._issuers import TrustedIssuer
from tests.core.factories import (
    make_capability,
    make_exposure,
    make_mapping,
    make_source,
)
from tests.starlette._tokens import AUDIENCE, NOW, idp, other_idp

__all__ = ["BASE", "TENANT_A", "TENANT_B", "World", "mcp_client", "open_world"]

BASE = "http://127.0.0.1:8000"
TENANT_A = "tenant-a"
TENANT_B = "tenant-b"

ROWS: dict[str, list[dict[str, Any]]] = {
    TENANT_A: [
        {"col_id": "a1", "col_title": "Alpha leave policy", "col_body": "Alpha staff leave days"},
        {"col_id": "a2", "col_title": "Alpha travel policy", "col_body": "Alpha leave travel"},
        {"col_id": "a3", "col_title": "Alpha leave calendar", "col_body": "leave planning"},
    ],
    TENANT_B: [
        {"col_id": "b1", "col_title": "Beta leave policy", "col_body": "Beta staff leave days"},
    ],
}


def _snapshot(tenant: str, exposures: Sequence[tuple[Exposure, frozenset[str]]]) -> ConfigSnapshot:
    source = make_source("s-1", tenant_id=tenant)
    capability = make_capability(["s-1"], tenant_id=tenant, name=f"{tenant} records")
    return ConfigSnapshot(
        tenant_id=tenant,
        version="v1",
        sources=(source,),
        mappings=(make_mapping("m-s-1", source_id="s-1", tenant_id=tenant),),
        capabilities=(capability,),
        exposures=tuple(e for e, _ in exposures),
        access_policies=tuple(
            AccessPolicy.matching(e, required_claims=claims) for e, claims in exposures
        ),
    )


def snapshot_a() -> ConfigSnapshot:
    """Tenant A's four exposures."""
    none: frozenset[str] = frozenset()
    return _snapshot(
        TENANT_A,
        [
            (make_exposure(tenant_id=TENANT_A, slug="hr_search", fetch_enabled=True), none),
            (
                make_exposure(exposure_id="exp-2", tenant_id=TENANT_A, slug="payroll"),
                frozenset({"department"}),
            ),
            (
                make_exposure(
                    exposure_id="exp-3",
                    tenant_id=TENANT_A,
                    slug="partner_search",
                    audience=("app-2",),
                ),
                none,
            ),
            (
                make_exposure(
                    exposure_id="exp-4", tenant_id=TENANT_A, slug="draft", published=False
                ),
                none,
            ),
        ],
    )


def snapshot_b() -> ConfigSnapshot:
    """Tenant B's one exposure, under the same slug as tenant A's first."""
    return _snapshot(TENANT_B, [(make_exposure(tenant_id=TENANT_B, slug="hr_search"), frozenset())])


@attrs.frozen
class World:
    """The app and what a test inspects."""

    app: Starlette
    audit: InMemoryAuditSink
    providers: Mapping[str, InMemorySearchProvider]


@contextlib.asynccontextmanager
async def open_world(
    *,
    audit: AuditSink | None = None,
    cache: Cache | None = None,
    issuers: Sequence[TrustedIssuer] | None = None,
) -> AsyncIterator[World]:
    """Build the two-tenant host (with ``cache`` as its result and selection cache, if given)
    and run its lifespan."""
    sink = InMemoryAuditSink()
    providers = {tenant: InMemorySearchProvider({"m-s-1": rows}) for tenant, rows in ROWS.items()}
    app = create_app(
        config=StaticConfigRepository([snapshot_a(), snapshot_b()]),
        providers={tenant: {"s-1": provider} for tenant, provider in providers.items()},
        model=FakeLanguageModel(),
        audit=audit or sink,
        issuers=issuers or [idp().trusted(), other_idp().trusted(tenants=(TENANT_B,))],
        resource_url=AUDIENCE,
        keyring=Keyring.generate(),
        clock=FakeClock(NOW),
        cache=cache,
    )
    async with app.router.lifespan_context(app):
        yield World(app=app, audit=sink, providers=providers)


def http(app: Starlette, token: str | None = None) -> httpx2.AsyncClient:
    """An HTTP client reaching ``app`` in-process, with ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url=BASE, headers=headers
    )


@contextlib.asynccontextmanager
async def mcp_client(app: Starlette, token: str | None) -> AsyncIterator[Client]:
    """The ``mcp`` SDK's client, connected to ``app`` over streamable HTTP with ``token``."""
    async with (
        http(app, token) as transport,
        Client(streamable_http_client(f"{BASE}/mcp", http_client=transport)) as client,
    ):
        yield client
