"""``POST /admin/v1/explain`` with hostile claims: only a caller a real token could be.

Explain promises the search runs "exactly as it would for that caller". A caller no trusted
issuer could vouch for — one holding a claim the host strips from every token (the core's
reserved ``esra.`` names, the per-token ``exp``/``iat``/``nbf``/``jti``), or a claim value no
policy or record filter is written for (NUL and other control characters, lone surrogates,
integers no database column holds) — is not explained: the body is refused as
``ESRA_INVALID_REQUEST``, and the refusal is audited without the hostile text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from esra.core.codes import AuditEvent
from tests.starlette.admin._host import ADMIN, AdminHost, open_admin_host, token

OPERATOR = token("ESRA_EXPOSURE_MANAGE", subject="tuner")


def _body(claims: object) -> dict[str, Any]:
    return {
        "exposure": "payroll",
        "arguments": {"prompt": "leave policy"},
        "caller": {"subject": "alice", "clientApp": "app-1", "claims": claims},
    }


async def _explain_raw(host: AdminHost, raw: bytes) -> tuple[int, Any]:
    async with host.client(OPERATOR) as client:
        response = await client.post(
            f"{ADMIN}/explain", content=raw, headers={"content-type": "application/json"}
        )
    return response.status_code, response.json()


def _raw(claims: object) -> bytes:
    # ensure_ascii keeps a lone surrogate as its \ud800 escape, as a hostile client sends it.
    return json.dumps(_body(claims)).encode()


HOSTILE_CLAIMS = [
    pytest.param({"department": "hr", "esra.tenant_id": "tenant-b"}, id="reserved-tenant-id"),
    pytest.param({"department": "hr", "esra.clearance": "top"}, id="reserved-prefix"),
    pytest.param({"department": "hr", "exp": 4102444800}, id="per-token-exp"),
    pytest.param({"department": "hr", "jti": "x"}, id="per-token-jti"),
    pytest.param({"department": "hr\x00"}, id="nul-in-value"),
    pytest.param({"department": "hr\nadmin"}, id="newline-in-value"),
    pytest.param({"department": "\x1b[31mhr"}, id="escape-in-value"),
    pytest.param({"department": "\ud800"}, id="lone-surrogate"),
    pytest.param({"department": ["hr", "fin\x00"]}, id="nul-in-list-item"),
    pytest.param({"department": ["hr", "\udfff"]}, id="surrogate-in-list-item"),
    pytest.param({"department": 10**30}, id="integer-beyond-64-bits"),
    pytest.param({"department": -(10**19)}, id="negative-integer-beyond-64-bits"),
    pytest.param({"department": "hr", "esra_tenant": "tenant-b"}, id="another-tenant-claim"),
]


@pytest.mark.parametrize("claims", HOSTILE_CLAIMS)
async def test_a_caller_no_token_could_be_is_refused(tmp_path: Path, claims: object) -> None:
    async with open_admin_host(tmp_path) as host:
        status, answer = await _explain_raw(host, _raw(claims))
        records = host.audit.events(AuditEvent.EXPLAIN)

    assert status == 400, answer
    assert answer["error"]["code"] == "ESRA_INVALID_REQUEST"
    # Never an explanation of the search the hostile caller asked for.
    assert "decisions" not in answer
    assert not host.audit.events(AuditEvent.SOURCES_RESOLVE)
    for record in records:
        assert "\x00" not in json.dumps(record.dimensions, ensure_ascii=False)


HOSTILE_SHAPES = [
    pytest.param({f"c{i}": "v" for i in range(5000)}, id="thousands-of-claims"),
    pytest.param({"department": ["v"] * 5000}, id="thousands-of-list-items"),
    pytest.param({"department": {"a": {"b": {"c": "d"}}}}, id="nested-object"),
    pytest.param({"department": [["hr"]]}, id="nested-list"),
    pytest.param({"department": 1.5}, id="fraction"),
    pytest.param({"department": None}, id="null"),
    pytest.param({"department": "x" * 100_000}, id="huge-string"),
    pytest.param({"dep\x00artment": "hr"}, id="nul-in-name"),
    pytest.param({"": "hr"}, id="empty-name"),
    pytest.param(["department", "hr"], id="claims-as-list"),
    pytest.param("department=hr", id="claims-as-string"),
]


@pytest.mark.parametrize("claims", HOSTILE_SHAPES)
async def test_a_hostile_claims_shape_is_an_invalid_request(tmp_path: Path, claims: object) -> None:
    async with open_admin_host(tmp_path) as host:
        status, answer = await _explain_raw(host, _raw(claims))

    assert status == 400, answer
    assert answer["error"]["code"] == "ESRA_INVALID_REQUEST"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({**_body({}), "exposure": 5}, id="exposure-as-number"),
        pytest.param(
            {**_body({}), "caller": {"subject": 5, "clientApp": "app-1"}}, id="subject-number"
        ),
        pytest.param(
            {**_body({}), "caller": {"subject": "a", "clientApp": ["app-1"]}}, id="app-list"
        ),
        pytest.param({**_body({}), "authorizedSources": [1, 2]}, id="sources-as-numbers"),
        pytest.param({**_body({}), "authorizedSources": ["s"] * 5000}, id="thousands-sources"),
        pytest.param({**_body({}), "arguments": {"prompt": 5}}, id="prompt-as-number"),
        pytest.param({**_body({}), "arguments": "leave"}, id="arguments-as-string"),
    ],
)
async def test_a_hostile_body_field_is_an_invalid_request(tmp_path: Path, body: object) -> None:
    async with open_admin_host(tmp_path) as host:
        status, answer = await _explain_raw(host, json.dumps(body).encode())

    assert status == 400, answer
    assert answer["error"]["code"] == "ESRA_INVALID_REQUEST"


async def test_deeply_nested_claims_are_an_invalid_request(tmp_path: Path) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    raw = _raw({"department": "PLACEHOLDER"}).replace(b'"PLACEHOLDER"', nested)
    async with open_admin_host(tmp_path) as host:
        status, answer = await _explain_raw(host, raw)

    assert status in {400, 413}, answer
    assert answer["error"]["code"] in {"ESRA_INVALID_REQUEST", "ESRA_PAYLOAD_TOO_LARGE"}


async def test_a_plain_caller_is_still_explained(tmp_path: Path) -> None:
    claims = {"department": "hr", "groups": ["hr", "payroll"], "level": 3, "manager": True}
    async with open_admin_host(tmp_path) as host:
        status, answer = await _explain_raw(host, _raw(claims))

    assert status == 200, answer
    assert answer["status"] == "complete"
