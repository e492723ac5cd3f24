"""GET /admin/v1/audit over the durable logs: a record holding text UTF-8 cannot carry.

A token's ``sub`` may hold a lone surrogate (JSON's ``\\ud800`` escape survives decoding) and
becomes the ``subject`` dimension of every administrative record its holder leaves — a
denied attempt on another tenant included. The JSON-lines file and the SQLite log keep it as
given (their JSON escapes it); read back, it reached the response, whose UTF-8 encoding
failed: a 500 for every page holding the record, hiding the records around it from review.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Mount

from esra.core._audit.jsonl import JsonLinesAuditLog
from esra.core._audit.query import AuditQuery, AuditReader
from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing.audit_contract import contract_record
from esra.sqlite._audit import SqliteAuditLog
from esra.starlette._admin import ADMIN_PATH, admin_app
from esra.starlette._auth import JwtVerifier
from tests.starlette._tokens import NOW, idp, other_idp
from tests.starlette._world import BASE, TENANT_A, TENANT_B, snapshot_a, snapshot_b
from tests.starlette.admin._host import token

URL = f"{BASE}{ADMIN_PATH}/audit"


@contextlib.asynccontextmanager
async def _client(reader: AuditReader) -> AsyncIterator[httpx2.AsyncClient]:
    admin = admin_app(
        config=StaticConfigRepository([snapshot_a(), snapshot_b()]),
        stores={},
        audit=InMemoryAuditSink(),
        clock=FakeClock(NOW),
        audit_reader=reader,
    )
    verifier = JwtVerifier(
        [idp().trusted(), other_idp().trusted(tenants=(TENANT_B,))], clock=FakeClock(NOW)
    )
    app = Starlette(
        routes=[Mount(ADMIN_PATH, app=admin)],
        middleware=[Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier))],
    )
    headers = {"Authorization": f"Bearer {token('GOVERNANCE_MANAGE')}"}
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url=BASE, headers=headers
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def _log(kind: str, tmp_path: Path) -> AsyncIterator[JsonLinesAuditLog | SqliteAuditLog]:
    if kind == "jsonl":
        yield JsonLinesAuditLog(tmp_path / "audit.jsonl")
        return
    log = SqliteAuditLog(tmp_path / "audit.db")
    await log.initialize()
    try:
        yield log
    finally:
        await log.close()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_a_planted_lone_surrogate_does_not_hide_the_page(kind: str, tmp_path: Path) -> None:
    """The page is served, every record on it, the planted one's text made whole."""
    async with _log(kind, tmp_path) as log:
        await log.write_batch(
            [
                contract_record(0, tenant=TENANT_A, subject="alice"),
                contract_record(1, tenant=TENANT_A, subject="eve\ud800", tags=("x\udfff",)),
                contract_record(2, tenant=TENANT_A, subject="bob"),
            ]
        )
        async with _client(log) as client:
            response = await client.get(URL)
    assert response.status_code == 200
    records = response.json()["records"]
    assert [r["correlationId"] for r in records] == ["corr-2", "corr-1", "corr-0"]
    planted = records[1]["dimensions"]
    assert planted["subject"].startswith("eve\ufffd")
    assert planted["tags"][0].startswith("x\ufffd")


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_a_non_finite_float_does_not_hide_the_page(kind: str, tmp_path: Path) -> None:
    """JSON has no NaN: the response carries the token as text rather than failing."""
    async with _log(kind, tmp_path) as log:
        await log.write_batch([contract_record(0, tenant=TENANT_A, ratio=math.nan, top=math.inf)])
        assert (await log.query(AuditQuery(tenant_id=TENANT_A))).records
        async with _client(log) as client:
            response = await client.get(URL)
    assert response.status_code == 200
    [record] = response.json()["records"]
    assert record["dimensions"] == {"ratio": "NaN", "top": "Infinity"}
