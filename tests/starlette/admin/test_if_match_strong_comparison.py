"""If-Match on the configuration endpoints: RFC 9110 §13.1.1, the strong comparison.

A weak entity tag (``W/"3"``) never matches under the strong comparison If-Match uses, so a
change naming one is refused as a version mismatch (``409 ESRA_CONFLICT``, audited
``conflict``), never applied — even when the draft is at that very version. An If-Match that
is not one quoted draft version as the ``ETag`` answered it (unquoted, a list, two header
lines, a leading zero, a sign, too many digits) is ``400 ESRA_INVALID_REQUEST``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.codes import AuditEvent
from tests.starlette.admin._host import ADMIN, open_admin_host, token

GOVERNOR = token("GOVERNANCE_MANAGE", subject="governor")
PUBLISHER = token("ESRA_EXPOSURE_MANAGE", subject="publisher")
READER = token("ESRA_DATA_READ", subject="reader")
POLICY_URL = f"{ADMIN}/access-policies/leave_search"


def _policy(*claims: str) -> dict[str, object]:
    return {"slug": "leave_search", "capability_id": "cap-1", "required_claims": list(claims)}


@pytest.mark.parametrize("tag", ['W/"1"', ' W/"1" '])
async def test_a_weak_tag_of_the_current_version_is_a_conflict_and_writes_nothing(
    tmp_path: Path, tag: str
) -> None:
    async with (
        open_admin_host(tmp_path) as host,
        host.client(GOVERNOR) as governor,
        host.client(READER) as reader,
    ):
        assert (await reader.get(f"{ADMIN}/config")).headers["etag"] == '"1"'
        response = await governor.put(
            POLICY_URL, json=_policy("department"), headers={"If-Match": tag}
        )
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["code"] == "ESRA_CONFLICT"
        assert "weak" in error["message"]
        assert (await reader.get(f"{ADMIN}/config")).json()["version"] == 1
        outcomes = [r.outcome for r in host.audit.events(AuditEvent.ADMIN_POLICY_AUTHOR)]
        assert outcomes == ["conflict"]


async def test_a_weak_tag_never_publishes(tmp_path: Path) -> None:
    async with (
        open_admin_host(tmp_path) as host,
        host.client(PUBLISHER) as publisher,
        host.client(READER) as reader,
    ):
        before = (await reader.get(f"{ADMIN}/config")).json()
        response = await publisher.post(
            f"{ADMIN}/exposures/hr_search/publish", headers={"If-Match": 'W/"1"'}
        )
        assert (response.status_code, response.json()["error"]["code"]) == (409, "ESRA_CONFLICT")
        after = (await reader.get(f"{ADMIN}/config")).json()
        assert (after["version"], after["publishedVersion"]) == (
            before["version"],
            before["publishedVersion"],
        )
        outcomes = [r.outcome for r in host.audit.events(AuditEvent.ADMIN_EXPOSURE_PUBLISH)]
        assert outcomes == ["conflict"]


@pytest.mark.parametrize(
    "tag",
    [
        "1",  # unquoted: not an entity tag
        '"1',
        '""1""',
        '"01"',  # never an ETag this API answers; the strong comparison is octet by octet
        '"-1"',
        '"+1"',
        '"1", "2"',
        '"1",',
        '"9999999999"',
        '"1" "1"',
        'W/"1", "1"',
        "W/*",
        'w/"1"',  # the weak indicator is case-sensitive (%s"W/")
        '"*"',
        '""',
        "",
        '"\u0661"',  # ARABIC-INDIC DIGIT ONE
    ],
)
async def test_an_if_match_that_is_not_one_draft_version_is_a_bad_request(
    tmp_path: Path, tag: str
) -> None:
    async with (
        open_admin_host(tmp_path) as host,
        host.client(GOVERNOR) as governor,
        host.client(READER) as reader,
    ):
        response = await governor.put(
            POLICY_URL, json=_policy(), headers={b"If-Match": tag.encode()}
        )
        assert response.status_code == 400, (tag, response.text)
        assert response.json()["error"]["code"] == "ESRA_INVALID_REQUEST"
        assert (await reader.get(f"{ADMIN}/config")).json()["version"] == 1
        outcomes = [r.outcome for r in host.audit.events(AuditEvent.ADMIN_POLICY_AUTHOR)]
        assert outcomes == ["rejected"]


async def test_if_match_named_twice_is_a_bad_request(tmp_path: Path) -> None:
    """Two header lines are one list (RFC 9110 §5.3): never just the first one read."""
    async with (
        open_admin_host(tmp_path) as host,
        host.client(GOVERNOR) as governor,
        host.client(READER) as reader,
    ):
        response = await governor.put(
            POLICY_URL, json=_policy(), headers=[("If-Match", '"1"'), ("If-Match", '"7"')]
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "ESRA_INVALID_REQUEST"
        assert (await reader.get(f"{ADMIN}/config")).json()["version"] == 1


async def test_a_strong_tag_and_a_star_still_apply(tmp_path: Path) -> None:
    async with open_admin_host(tmp_path) as host, host.client(GOVERNOR) as governor:
        strong = await governor.put(POLICY_URL, json=_policy(), headers={"If-Match": ' "1" '})
        assert (strong.status_code, strong.headers["etag"]) == (200, '"2"')
        star = await governor.put(POLICY_URL, json=_policy("x"), headers={"If-Match": "*"})
        assert (star.status_code, star.headers["etag"]) == (200, '"3"')
