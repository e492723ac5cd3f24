"""GET /admin/v1/audit: the token tenant's records only, for the oversight roles only."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx2
import pytest
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Mount

from esra.core._audit.query import AuditReader
from esra.core._static_config import StaticConfigRepository
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing._audit_log import InMemoryAuditLog
from esra.core.testing.audit_contract import T0, contract_record
from esra.starlette._admin import ADMIN_PATH, admin_app
from esra.starlette._auth import JwtVerifier
from tests.starlette._tokens import NOW, idp, other_idp
from tests.starlette._world import BASE, TENANT_A, TENANT_B, snapshot_a, snapshot_b
from tests.starlette.admin._host import token

URL = f"{BASE}{ADMIN_PATH}/audit"


@contextlib.asynccontextmanager
async def _client(
    reader: AuditReader | None, bearer: str | None, audit: InMemoryAuditSink | None = None
) -> AsyncIterator[httpx2.AsyncClient]:
    admin = admin_app(
        config=StaticConfigRepository([snapshot_a(), snapshot_b()]),
        stores={},
        audit=audit or InMemoryAuditSink(),
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
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url=BASE, headers=headers
    ) as client:
        yield client


async def _log() -> InMemoryAuditLog:
    log = InMemoryAuditLog()
    await log.write_batch(
        [
            contract_record(0, tenant=TENANT_A, subject="alice"),
            contract_record(1, tenant=TENANT_A, event=AuditEvent.FETCH, subject="bob"),
            contract_record(2, tenant=TENANT_B, subject="alice", correlation="corr-0"),
            contract_record(3, tenant=TENANT_A, event=AuditEvent.FETCH, sources=("s-1",)),
        ]
    )
    return log


async def test_the_tenant_reads_its_own_records_filtered_and_paged() -> None:
    """Newest first, filters applied, a cursor to the next page; tenant B's never shown."""
    log = await _log()
    async with _client(log, token("GOVERNANCE_MANAGE")) as client:
        first = (await client.get(URL, params={"limit": "2"})).json()
        assert [r["correlationId"] for r in first["records"]] == ["corr-3", "corr-1"]
        assert first["records"][0]["dimensions"] == {"sources": ["s-1"]}
        rest = (await client.get(URL, params={"limit": "2", "cursor": first["nextCursor"]})).json()
        assert [r["correlationId"] for r in rest["records"]] == ["corr-0"]
        assert rest["nextCursor"] is None
        assert {r["tenantId"] for r in first["records"] + rest["records"]} == {TENANT_A}
        fetches = await client.get(URL, params=[("event", "esra.fetch"), ("subject", "bob")])
        assert [r["correlationId"] for r in fetches.json()["records"]] == ["corr-1"]
        window = {
            "since": (T0 + timedelta(seconds=1)).isoformat(),
            "until": (T0 + timedelta(seconds=3)).isoformat(),
        }
        timed = (await client.get(URL, params=window)).json()["records"]
        assert [r["correlationId"] for r in timed] == ["corr-1"]
        alice = (await client.get(URL, params={"correlation_id": "corr-0"})).json()["records"]
        assert [(r["tenantId"], r["dimensions"]) for r in alice] == [
            (TENANT_A, {"subject": "alice"})
        ]
    async with _client(log, token("SECURITY_MANAGE", tenant=TENANT_B)) as client:
        theirs = (await client.get(URL)).json()["records"]
        assert [(r["tenantId"], r["correlationId"]) for r in theirs] == [(TENANT_B, "corr-0")]


@pytest.mark.parametrize(
    "roles", [(), ("ESRA_DATA_READ",), ("ESRA_DATA_MANAGE", "ESRA_EXPOSURE_MANAGE")]
)
async def test_other_roles_are_forbidden(roles: tuple[str, ...]) -> None:
    """The ESRA & Data roles do not read the audit."""
    async with _client(await _log(), token(*roles)) as client:
        response = await client.get(URL)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "ESRA_FORBIDDEN"


async def test_every_read_is_itself_audited_with_its_reader_and_filters() -> None:
    """Who read the tenant's audit, with which filters, and how much came back."""
    audit = InMemoryAuditSink()
    since = (T0 + timedelta(seconds=1)).isoformat()
    async with _client(await _log(), token("GOVERNANCE_MANAGE"), audit) as client:
        await client.get(URL, params=[("event", "esra.fetch"), ("since", since)])
    [read] = audit.records
    assert (read.event, read.tenant_id, read.outcome) == (
        AuditEvent.ADMIN_AUDIT_READ,
        TENANT_A,
        "ok",
    )
    assert read.dimensions["subject"] == "operator"
    assert read.dimensions["events"] == ("esra.fetch",)
    assert read.dimensions["since"] == since
    assert read.dimensions["records"] == 2


async def test_a_refused_read_is_audited_as_denied() -> None:
    audit = InMemoryAuditSink()
    async with _client(await _log(), token("ESRA_DATA_MANAGE"), audit) as client:
        assert (await client.get(URL)).status_code == 403
    [refused] = audit.records
    assert (refused.event, refused.outcome, refused.reason) == (
        AuditEvent.ADMIN_AUDIT_READ,
        "denied",
        "role",
    )
    assert "records" not in refused.dimensions


async def test_without_a_token_it_is_401() -> None:
    """No token, no audit."""
    async with _client(await _log(), None) as client:
        response = await client.get(URL)
    assert response.status_code == 401


async def test_without_a_reader_it_is_a_classified_404() -> None:
    """A host that keeps no readable audit says so."""
    async with _client(None, token("GOVERNANCE_MANAGE")) as client:
        response = await client.get(URL)
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "ESRA_NOT_FOUND",
        "message": "This host keeps no readable audit log.",
    }


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": "1001"},
        {"limit": "ten"},
        {"since": "yesterday"},
        {"since": "2026-03-01T09:00:00"},  # no offset
        {"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"},
        {"event": "esra.no_such_event"},
        {"cursor": "forged"},
        {"tenant_id": TENANT_B},  # the tenant is the token's, never a parameter
        [("subject", "a"), ("subject", "b")],
        {"subject": "x" * 600},
    ],
)
async def test_bad_parameters_are_400(params: object) -> None:
    """Every malformed filter is a classified 400, never a 500 or a silent widening."""
    async with _client(await _log(), token("GOVERNANCE_MANAGE")) as client:
        response = await client.get(URL, params=params)  # type: ignore[arg-type]
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "ESRA_INVALID_REQUEST"
