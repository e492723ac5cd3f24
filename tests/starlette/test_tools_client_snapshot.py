"""The tools a caller sees are computed on its client application's runtime snapshot."""

from __future__ import annotations

from typing import Any

import pytest

import esra.starlette._tools as tools_module
from esra.core._context import InvocationContext
from esra.core._pipeline.scope import admitted_exposure
from esra.core._retriever import Retriever
from esra.core._static_config import StaticConfigRepository
from esra.core.config import AccessPolicy, ConfigSnapshot, SourcePolicy
from esra.core.testing import FakeLanguageModel, InMemoryAuditSink, InMemorySearchProvider
from esra.starlette._auth import AuthenticatedCaller
from esra.starlette._tools import EsraTools, TenantServices
from tests.core.factories import TENANT, make_capability, make_exposure, make_mapping, make_source

APP_A = "app-a"
APP_B = "app-b"


def _snapshot() -> ConfigSnapshot:
    sources = (
        make_source("s-shared"),
        make_source("s-only-b", policy=SourcePolicy(allowed_client_apps=frozenset({APP_B}))),
    )
    exposures = (
        make_exposure(exposure_id="exp-shared", slug="shared_search", audience=(APP_A, APP_B)),
        make_exposure(exposure_id="exp-only-b", slug="b_search", audience=[APP_B]),
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="v1",
        sources=sources,
        mappings=tuple(make_mapping(f"m-{s.id}", source_id=s.id) for s in sources),
        capabilities=(make_capability([s.id for s in sources]),),
        exposures=exposures,
        access_policies=tuple(AccessPolicy.matching(e) for e in exposures),
    )


def _caller(client_app_id: str) -> AuthenticatedCaller:
    return AuthenticatedCaller(
        issuer="https://idp.example", tenant_id=TENANT, client_app_id=client_app_id, subject="u1"
    )


async def test_tools_are_listed_from_the_client_applications_runtime_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A's tool list is decided on a snapshot holding none of B's exposures or sources, and
    lists only the shared tool; B still sees its own."""
    seen: list[ConfigSnapshot] = []

    def spying(ctx: InvocationContext, snapshot: ConfigSnapshot) -> Any:
        seen.append(snapshot)
        return admitted_exposure(ctx, snapshot)

    monkeypatch.setattr(tools_module, "admitted_exposure", spying)
    config = StaticConfigRepository([_snapshot()])
    retriever = Retriever(
        config=config,
        providers={"s-shared": InMemorySearchProvider({}), "s-only-b": InMemorySearchProvider({})},
        model=FakeLanguageModel(),
        audit=InMemoryAuditSink(),
        tenant_id=TENANT,
    )
    tools = EsraTools(
        config=config,
        tenants={TENANT: TenantServices(retriever=retriever)},
        audit=InMemoryAuditSink(),
    )

    assert sorted(await tools.visible_to(_caller(APP_A))) == ["esra_shared_search"]
    assert seen
    for snapshot in seen:
        assert [e.slug for e in snapshot.exposures] == ["shared_search"]
        assert [s.id for s in snapshot.sources] == ["s-shared"]
        assert "s-only-b" not in repr(snapshot)

    seen.clear()
    assert sorted(await tools.visible_to(_caller(APP_B))) == [
        "esra_b_search",
        "esra_shared_search",
    ]
    assert {s.id for s in seen[0].sources} == {"s-shared", "s-only-b"}
