"""Bad inputs to the admin API get a classified error (docs/admin-api.md#errors).

Each test is a hole a hostile review found: a request that ended in an unclassified
``500 ESRA_INTERNAL`` where the docs name a 4xx code (a 4,301-digit number, a time past
``datetime`` in UTC, an audit cursor past 64 bits, a source given as a list, a document
action on a store not Ready), a wrong JSON type silently coerced into the opposite setting
(``"is_returnable": "false"`` saved as true), or an OpenAPI document that omitted a status
the endpoint answers.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Mount

from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.sqlite import SqliteAuditLog
from esra.starlette._admin import ADMIN_PATH, admin_app
from esra.starlette._auth import JwtVerifier
from tests.starlette._tokens import NOW, idp, other_idp
from tests.starlette._world import BASE, TENANT_B, snapshot_a, snapshot_b
from tests.starlette.admin._host import ADMIN, open_admin_host, token

pytestmark = pytest.mark.asyncio

_JSON = {"content-type": "application/json"}
_EVERY_ROLE = ("ESRA_DATA_MANAGE", "SECURITY_MANAGE", "GOVERNANCE_MANAGE", "ESRA_EXPOSURE_MANAGE")
# More digits than Python's int-from-text limit (4300): valid JSON that json.loads refuses
# with a plain ValueError, not a JSONDecodeError.
_HUGE_INTEGER = b"1" * 5000
# Valid ISO-8601 times with an offset that fall outside datetime's range once moved to UTC.
_AFTER_MAX = "9999-12-31T23:59:59-14:00"
_BEFORE_MIN = "0001-01-01T00:00:00+14:00"


def _error(response: httpx2.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


# -- 1. A JSON number over 4300 digits: every JSON body endpoint answers 500 -----------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/secrets/db", b'{"value": ' + _HUGE_INTEGER + b"}"),
        ("PUT", "/store/settings", b'{"maxAttempts": ' + _HUGE_INTEGER + b"}"),
        ("PUT", "/capabilities/cap-1", b'{"id": "cap-1", "limits": ' + _HUGE_INTEGER + b"}"),
        ("POST", "/explain", b'{"exposure": ' + _HUGE_INTEGER + b"}"),
    ],
)
async def test_a_json_number_too_long_to_convert_is_a_400_not_a_500(
    tmp_path: Path, method: str, path: str, body: bytes
) -> None:
    """docs/admin-api.md: malformed JSON is ``400 ESRA_INVALID_REQUEST``; never ESRA_INTERNAL."""
    async with open_admin_host(tmp_path) as host, host.client(token(*_EVERY_ROLE)) as client:
        response = await client.request(method, ADMIN + path, content=body, headers=_JSON)
    assert _error(response) == (400, "ESRA_INVALID_REQUEST"), response.text


# -- 2. A time whose UTC form overflows: the review list answers 500 -------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"since": _AFTER_MAX},
        {"until": _BEFORE_MIN},
        {
            "cursor": base64.urlsafe_b64encode(
                json.dumps({"at": _AFTER_MAX, "id": "doc-1"}).encode()
            ).decode()
        },
    ],
    ids=["since", "until", "cursor"],
)
async def test_an_out_of_range_time_in_the_review_list_is_a_400(
    tmp_path: Path, params: dict[str, str]
) -> None:
    """A malformed parameter of GET /store/documents is ``400 ESRA_INVALID_REQUEST``."""
    async with open_admin_host(tmp_path) as host, host.client(token("ESRA_DATA_READ")) as client:
        response = await client.get(f"{ADMIN}/store/documents", params=params)
    assert _error(response) == (400, "ESRA_INVALID_REQUEST"), response.text


@contextlib.asynccontextmanager
async def _audit_client(tmp_path: Path) -> AsyncIterator[httpx2.AsyncClient]:
    """The admin API over a real SQLite audit log, as ``esra serve`` reads it."""
    log = SqliteAuditLog(tmp_path / "audit.db")
    await log.initialize()
    try:
        admin = admin_app(
            config=StaticConfigRepository([snapshot_a(), snapshot_b()]),
            stores={},
            audit=InMemoryAuditSink(),
            clock=FakeClock(NOW),
            audit_reader=log,
        )
        verifier = JwtVerifier(
            [idp().trusted(), other_idp().trusted(tenants=(TENANT_B,))], clock=FakeClock(NOW)
        )
        app = Starlette(
            routes=[Mount(ADMIN_PATH, app=admin)],
            middleware=[Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier))],
        )
        async with httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app, raise_app_exceptions=False),
            base_url=BASE,
            headers={"Authorization": f"Bearer {token('GOVERNANCE_MANAGE')}"},
        ) as client:
            yield client
    finally:
        await log.close()


def _audit_cursor(at: str, seq: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"at": at, "seq": seq}).encode()).decode()


@pytest.mark.parametrize(
    "params",
    [
        {"since": _AFTER_MAX},
        {"until": _BEFORE_MIN},
        {"cursor": _audit_cursor(_AFTER_MAX, 1)},
        {"cursor": _audit_cursor("2026-01-01T00:00:00+00:00", 10**30)},
    ],
    ids=["since", "until", "cursor-time", "cursor-seq"],
)
async def test_an_out_of_range_audit_filter_is_a_400(
    tmp_path: Path, params: dict[str, str]
) -> None:
    """docs/admin-api.md#audit: a malformed time or a cursor the server did not issue is 400."""
    async with _audit_client(tmp_path) as client:
        response = await client.get(f"{BASE}{ADMIN_PATH}/audit", params=params)
    assert _error(response) == (400, "ESRA_INVALID_REQUEST"), response.text


# -- 3. A source or mapping that is not a JSON object: 500 -----------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"source": []},
        {"source": "s-1"},
        {"source": "SOURCE", "mappings": ["m-s-1"]},
        {"source": "SOURCE", "mappings": [[]]},
    ],
    ids=["source-list", "source-text", "mapping-text", "mapping-list"],
)
async def test_a_source_or_mapping_of_the_wrong_json_type_is_refused_not_a_500(
    tmp_path: Path, body: dict[str, Any]
) -> None:
    """A bad field is reported (400/422), never ESRA_INTERNAL (docs/admin-api.md#errors)."""
    async with open_admin_host(tmp_path) as host, host.client(token(*_EVERY_ROLE)) as client:
        config = (await client.get(f"{ADMIN}/config")).json()["configuration"]
        source = {k: v for k, v in config["sources"][0].items() if k != "tenant_id"}
        if body["source"] == "SOURCE":
            body = {**body, "source": source}
        response = await client.put(f"{ADMIN}/sources/s-1", json=body)
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["code"] in (
        "ESRA_INVALID_REQUEST",
        "ESRA_CONFIGURATION_INVALID",
    )


# -- 4. Document actions on a store that is not Ready: 500 -----------------------------------


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("DELETE", ""), ("POST", "/release"), ("POST", "/reindex"), ("GET", "/download")],
)
async def test_a_document_action_on_a_store_not_ready_is_409_store_not_ready(
    tmp_path: Path, method: str, suffix: str
) -> None:
    """docs/admin-api.md#errors: ``ESRA_STORE_NOT_READY 409`` while disabled or initialising
    (GET /store/documents/{id} answers it; its siblings answer 500)."""
    async with (
        open_admin_host(tmp_path, initialised=False) as host,
        host.client(token("ESRA_DATA_MANAGE")) as client,
    ):
        response = await client.request(method, f"{ADMIN}/store/documents/doc-1{suffix}")
    assert _error(response) == (409, "ESRA_STORE_NOT_READY"), response.text


# -- 5. A boolean sent as the text "false" is saved as true ----------------------------------


async def test_a_field_marked_not_returnable_with_text_false_is_not_made_returnable(
    tmp_path: Path,
) -> None:
    """``"is_returnable": "false"`` is a bad field (a string, not a boolean): refused with its
    path, never saved as ``true`` — which would hand the field to every caller."""
    async with open_admin_host(tmp_path) as host, host.client(token(*_EVERY_ROLE)) as client:
        config = (await client.get(f"{ADMIN}/config")).json()["configuration"]
        source = {k: v for k, v in config["sources"][0].items() if k != "tenant_id"}
        mapping = {k: v for k, v in config["mappings"][0].items() if k != "tenant_id"}
        secret_field = {
            "name": "salary",
            "column": "col_salary",
            "type": "text",
            "is_searchable": False,
            "is_filterable": False,
            "is_returnable": "false",
            "is_restricted": False,
            "allowed_operators": [],
            "description": "",
        }
        mapping["fields"] = [*mapping["fields"], secret_field]
        response = await client.put(
            f"{ADMIN}/sources/s-1", json={"source": source, "mappings": [mapping]}
        )
        saved = (await client.get(f"{ADMIN}/config")).json()["configuration"]
    fields = {f["name"]: f for m in saved["mappings"] for f in m["fields"]}
    assert fields.get("salary", {}).get("is_returnable") is not True, (
        "the text 'false' was saved as is_returnable=true"
    )
    assert _error(response) == (422, "ESRA_CONFIGURATION_INVALID"), response.text


async def test_an_exposure_with_fetch_enabled_text_false_does_not_enable_fetch(
    tmp_path: Path,
) -> None:
    """``"fetch_enabled": "false"`` must not publish a fetch tool (saved as true today)."""
    async with open_admin_host(tmp_path) as host, host.client(token(*_EVERY_ROLE)) as client:
        config = (await client.get(f"{ADMIN}/config")).json()["configuration"]
        exposure = next(e for e in config["exposures"] if e["slug"] == "payroll")
        assert exposure["fetch_enabled"] is False
        exposure = {k: v for k, v in exposure.items() if k != "tenant_id"}
        response = await client.put(
            f"{ADMIN}/exposures/payroll", json={**exposure, "fetch_enabled": "false"}
        )
        saved = (await client.get(f"{ADMIN}/config")).json()["configuration"]
    after = next(e for e in saved["exposures"] if e["slug"] == "payroll")
    assert after["fetch_enabled"] is False, "the text 'false' was saved as fetch_enabled=true"
    assert _error(response) == (422, "ESRA_CONFIGURATION_INVALID"), response.text


# -- 6. The OpenAPI document omits statuses the endpoints answer -----------------------------


async def test_openapi_lists_the_409_a_stale_if_match_answers(tmp_path: Path) -> None:
    """docs/admin-api.md#concurrent-edits-if-match: every change (PUT and publish) answers 409
    for a stale If-Match and 400 for a malformed one; the OpenAPI document must list them."""
    async with open_admin_host(tmp_path) as host, host.client(token(*_EVERY_ROLE)) as client:
        document = (await client.get(f"{ADMIN}/openapi.json")).json()
        stale = await client.put(
            f"{ADMIN}/secrets/db", json={"value": "v"}, headers={"If-Match": '"99"'}
        )
        malformed = await client.post(
            f"{ADMIN}/exposures/hr_search/publish", headers={"If-Match": '"x"'}
        )
    assert _error(stale) == (409, "ESRA_CONFLICT")
    assert _error(malformed) == (400, "ESRA_INVALID_REQUEST")
    secrets = document["paths"][f"{ADMIN_PATH}/secrets/{{reference}}"]["put"]["responses"]
    publish = document["paths"][f"{ADMIN_PATH}/exposures/{{slug}}/publish"]["post"]["responses"]
    assert "409" in secrets, sorted(secrets)
    assert {"400", "409"} <= set(publish), sorted(publish)
