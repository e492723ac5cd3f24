"""Concurrent configuration edits over HTTP: ETag, If-Match, and 409 ESRA_CONFLICT."""

from __future__ import annotations

import asyncio
from pathlib import Path

from esra.core.codes import AuditEvent
from tests.starlette.admin._host import ADMIN, open_admin_host, token

GOVERNOR = token("GOVERNANCE_MANAGE", subject="governor")
OTHER_GOVERNOR = token("GOVERNANCE_MANAGE", subject="governor-2")
READER = token("ESRA_DATA_READ", subject="reader")


def _policy(*claims: str) -> dict[str, object]:
    return {"slug": "leave_search", "capability_id": "cap-1", "required_claims": list(claims)}


async def test_two_edits_of_one_draft_version_one_succeeds_the_other_conflicts(
    tmp_path: Path,
) -> None:
    """Both name the version they read (If-Match "1"); exactly one is applied."""
    async with (
        open_admin_host(tmp_path) as host,
        host.client(READER) as reader,
        host.client(GOVERNOR) as first,
        host.client(OTHER_GOVERNOR) as second,
    ):
        draft = await reader.get(f"{ADMIN}/config")
        assert draft.headers["etag"] == '"1"'
        responses = await asyncio.gather(
            first.put(
                f"{ADMIN}/access-policies/leave_search",
                json=_policy("department"),
                headers={"If-Match": draft.headers["etag"]},
            ),
            second.put(
                f"{ADMIN}/access-policies/leave_search",
                json=_policy("region"),
                headers={"If-Match": draft.headers["etag"]},
            ),
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200, 409]
        conflict = next(r for r in responses if r.status_code == 409)
        assert conflict.json()["error"]["code"] == "ESRA_CONFLICT"
        assert "version 2, not 1" in conflict.json()["error"]["message"]
        winner = next(r for r in responses if r.status_code == 200)
        assert winner.headers["etag"] == '"2"'
        after = (await reader.get(f"{ADMIN}/config")).json()
        assert after["version"] == 2
        outcomes = sorted(r.outcome for r in host.audit.events(AuditEvent.ADMIN_POLICY_AUTHOR))
        assert outcomes == ["conflict", "ok"]


async def test_a_stale_if_match_is_refused_and_a_fresh_one_applies(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path) as host, host.client(GOVERNOR) as governor:
        url = f"{ADMIN}/access-policies/leave_search"
        applied = await governor.put(url, json=_policy(), headers={"If-Match": '"1"'})
        assert (applied.status_code, applied.json()["version"]) == (200, 2)
        stale = await governor.put(url, json=_policy("x"), headers={"If-Match": '"1"'})
        assert (stale.status_code, stale.json()["error"]["code"]) == (409, "ESRA_CONFLICT")
        fresh = await governor.put(
            url,
            json=_policy("x"),
            headers={"If-Match": applied.headers["etag"], "Esra-Change-Reason": "CHG-9"},
        )
        assert (fresh.status_code, fresh.headers["etag"]) == (200, '"3"')
        # Without If-Match the server edits the version it reads.
        unnamed = await governor.put(url, json=_policy())
        assert unnamed.json()["version"] == 4


async def test_a_malformed_if_match_or_reason_is_a_bad_request(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path) as host, host.client(GOVERNOR) as governor:
        url = f"{ADMIN}/access-policies/leave_search"
        for headers in (
            {"If-Match": '"abc"'},
            {"If-Match": '"1", "2"'},
            {"Esra-Change-Reason": "x" * 501},
        ):
            response = await governor.put(url, json=_policy(), headers=headers)
            assert response.status_code == 400, headers
            assert response.json()["error"]["code"] == "ESRA_INVALID_REQUEST"
        assert all(r.outcome != "ok" for r in host.audit.events(AuditEvent.ADMIN_POLICY_AUTHOR))
