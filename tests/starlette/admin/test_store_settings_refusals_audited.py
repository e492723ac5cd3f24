"""``PUT /store/settings``: every refusal of a role holder's change is on the audit trail.

The core audits what it refuses itself (a refused role, a refused value, a revision
conflict); the API audits what it refuses before the core sees the change — a body that is
missing, not JSON or not an object, an unknown setting, an If-Match that names no revision,
a store that is not Ready — as ``esra.store.configure`` with the tenant, the operator, the
outcome (``rejected``; ``conflict`` for a weak tag, a version mismatch) and the error code.
Never the request's text: a hostile body or header leaves no trace of itself in the record.
Each refusal is recorded once, whichever layer refused it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.audit import AuditRecord
from esra.core.codes import AuditEvent
from tests.starlette._world import TENANT_A
from tests.starlette.admin._host import ADMIN, AdminHost, open_admin_host, token

MANAGER = token("ESRA_DATA_MANAGE", subject="manager")
SETTINGS = f"{ADMIN}/store/settings"
JSON = {"content-type": "application/json"}
# Planted in each hostile request: it must reach no audit record.
MARK = "PLANTED-7c1e"

REFUSED = [
    pytest.param({}, None, (415, "rejected", "ESRA_UNSUPPORTED_MEDIA_TYPE"), id="no body"),
    pytest.param(
        {"content-type": "text/plain"},
        f"scanPolicy={MARK}".encode(),
        (415, "rejected", "ESRA_UNSUPPORTED_MEDIA_TYPE"),
        id="not json",
    ),
    pytest.param(JSON, f'{{"{MARK}'.encode(), (400, "rejected", "ESRA_INVALID_REQUEST"), id="torn"),
    pytest.param(
        JSON, f'["{MARK}"]'.encode(), (400, "rejected", "ESRA_INVALID_REQUEST"), id="list"
    ),
    pytest.param(
        JSON,
        f'{{"maxAttempts": 4, "maxAttempts": "{MARK}"}}'.encode(),
        (400, "rejected", "ESRA_INVALID_REQUEST"),
        id="key twice",
    ),
    pytest.param(
        JSON, f'{{"{MARK}": 1}}'.encode(), (400, "rejected", "ESRA_INVALID_REQUEST"), id="unknown"
    ),
    pytest.param(
        JSON,
        f'{{"maxAttempts": 4, "lease_{MARK}": 1}}'.encode(),
        (400, "rejected", "ESRA_INVALID_REQUEST"),
        id="unknown beside a known one",
    ),
    pytest.param(
        {**JSON, "If-Match": f'"{MARK}"'},
        b'{"maxAttempts": 4}',
        (400, "rejected", "ESRA_INVALID_REQUEST"),
        id="if-match not a revision",
    ),
    pytest.param(
        {**JSON, "If-Match": '"0", "1"'},
        b'{"maxAttempts": 4}',
        (400, "rejected", "ESRA_INVALID_REQUEST"),
        id="if-match two revisions",
    ),
    pytest.param(
        {**JSON, "If-Match": 'W/"0"'},
        b'{"maxAttempts": 4}',
        (409, "conflict", "ESRA_CONFLICT"),
        id="if-match weak",
    ),
]


def _only_refusal(host: AdminHost) -> AuditRecord:
    (record,) = host.audit.events(AuditEvent.STORE_CONFIGURE)
    assert MARK not in repr(record)
    return record


@pytest.mark.parametrize(("headers", "body", "refusal"), REFUSED)
async def test_a_change_refused_before_the_core_is_audited_without_its_text(
    tmp_path: Path, headers: dict[str, str], body: bytes | None, refusal: tuple[int, str, str]
) -> None:
    status, outcome, reason = refusal
    async with open_admin_host(tmp_path) as host, host.client(MANAGER) as manager:
        refused = await manager.put(SETTINGS, content=body, headers=headers)
        assert (refused.status_code, refused.json()["error"]["code"]) == (status, reason)
        assert (await manager.get(SETTINGS)).json()["revision"] == 0

    record = _only_refusal(host)
    assert (record.tenant_id, record.outcome, record.reason) == (TENANT_A, outcome, reason)
    assert record.dimensions["operator"] == "manager"


async def test_a_change_on_a_store_not_ready_is_audited(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path, initialised=False) as host, host.client(MANAGER) as m:
        refused = await m.put(SETTINGS, json={"scanPolicy": "reject"})
        assert (refused.status_code, refused.json()["error"]["code"]) == (
            409,
            "ESRA_STORE_NOT_READY",
        )

    record = _only_refusal(host)
    assert (record.tenant_id, record.outcome) == (TENANT_A, "rejected")
    assert (record.reason, record.dimensions["operator"]) == ("ESRA_STORE_NOT_READY", "manager")


@pytest.mark.parametrize(
    ("body", "headers", "outcome"),
    [
        pytest.param({"maxAttempts": 0}, {}, "rejected", id="a value the core refuses"),
        pytest.param({"maxAttempts": 4}, {"If-Match": '"7"'}, "conflict", id="a stale revision"),
    ],
)
async def test_a_refusal_of_the_core_is_recorded_once(
    tmp_path: Path, body: dict[str, object], headers: dict[str, str], outcome: str
) -> None:
    async with open_admin_host(tmp_path) as host, host.client(MANAGER) as manager:
        refused = await manager.put(SETTINGS, json=body, headers=headers)
        assert refused.status_code in (400, 409)

    record = _only_refusal(host)
    assert (record.tenant_id, record.outcome) == (TENANT_A, outcome)
    assert record.reason is not None
    assert record.dimensions["operator"] == "manager"
