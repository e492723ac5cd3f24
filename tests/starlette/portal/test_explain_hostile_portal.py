"""The portal's explain form refuses a caller no token could make, as the admin API does.

A claim the host strips from every token (the reserved ``esra.`` names, the per-token
``exp``) or a claim value holding a control character is a 400 page; nothing is explained.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from esra.core.codes import AuditEvent
from esra.core.testing import InMemoryAuditSink
from tests.core.factories import CLIENT_APP, SLUG
from tests.starlette.portal._site import csrf_of, http, open_site, sign_in
from tests.starlette.portal.test_explain_page import _explainer, _tuner_token

_VALID = {
    "exposure": SLUG,
    "question": "parental leave",
    "subject": "alice",
    "client_app": CLIENT_APP,
}


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param("region=emea\nesra.tenant_id=tenant-b", id="reserved-tenant-id"),
        pytest.param("esra.clearance=top", id="reserved-prefix"),
        pytest.param("exp=4102444800", id="per-token-exp"),
        pytest.param("region=em\x07ea", id="bell-in-value"),
        pytest.param("region=em\x00ea", id="nul-in-value"),
        pytest.param("groups=hr\ngroups=pay\x1b[2Jroll", id="escape-in-list-item"),
    ],
)
async def test_a_caller_no_token_could_make_is_refused(tmp_path: Path, claims: str) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        await sign_in(client, _tuner_token())
        csrf = csrf_of(await client.get("/portal/explain"))
        answer = await client.post(
            "/portal/explain", data={"csrf": csrf, **_VALID, "claims": claims}
        )
    assert answer.status_code == 400, answer.text
    assert 'role="alert"' in answer.text
    assert "Decisions" not in answer.text
    assert not audit.events(AuditEvent.SOURCES_RESOLVE)
    assert all(r.outcome != "ok" for r in audit.events(AuditEvent.EXPLAIN))
