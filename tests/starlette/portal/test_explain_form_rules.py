"""The portal's explain form is held to the admin API's rules for the same request.

``POST /admin/v1/explain`` refuses an exposure, caller subject, client application or claim
name that is not 1 to 256 printable characters, more than 64 claims, and claim values over
1,024 characters. The portal's form fed the same ``ExplainService`` with none of those
checks: a subject carrying a line break, a bidi override or 4,000 characters was run and
written into the ``esra.explain`` audit record (``explained_subject``) as given. Each is now
refused (400) before anything runs, and nothing is recorded as explained.
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
    "claims": "region=emea",
}


@pytest.mark.parametrize(
    "hostile",
    [
        {"subject": "alice\r\nexplained_subject=root"},
        {"subject": "ali\u202ece"},
        {"subject": "a" * 300},
        {"client_app": "hr\x1b[2Jportal"},
        {"exposure": "hr\x00search"},
        {"claims": "reg\u200bion\x07=emea"},
        {"claims": "\n".join(f"claim{i}=v" for i in range(65))},
        {"claims": "region=" + "e" * 1025},
    ],
    ids=[
        "subject-line-break",
        "subject-bidi",
        "subject-too-long",
        "client-app-escape",
        "exposure-nul",
        "claim-name-control",
        "too-many-claims",
        "claim-value-too-long",
    ],
)
async def test_a_field_the_admin_api_refuses_is_refused_here_too(
    tmp_path: Path, hostile: dict[str, str]
) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        await sign_in(client, _tuner_token())
        csrf = csrf_of(await client.get("/portal/explain"))
        answer = await client.post("/portal/explain", data={"csrf": csrf, **_VALID, **hostile})
    assert answer.status_code == 400, answer.text
    assert 'role="alert"' in answer.text
    assert audit.events(AuditEvent.EXPLAIN) == []


async def test_the_valid_form_is_still_explained(tmp_path: Path) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        await sign_in(client, _tuner_token())
        csrf = csrf_of(await client.get("/portal/explain"))
        claims = _VALID["claims"] + "\ngroups=hr\ngroups=payroll"
        answer = await client.post(
            "/portal/explain", data={"csrf": csrf, **_VALID, "claims": claims}
        )
    assert answer.status_code == 200, answer.text
    (record,) = audit.events(AuditEvent.EXPLAIN)
    assert (record.outcome, record.dimensions["explained_subject"]) == ("ok", "alice")


async def test_an_overlong_field_is_called_too_long_not_missing(tmp_path: Path) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        await sign_in(client, _tuner_token())
        csrf = csrf_of(await client.get("/portal/explain"))
        answer = await client.post(
            "/portal/explain", data={"csrf": csrf, **_VALID, "claims": "a=" + "b" * 4000}
        )
    assert answer.status_code == 400
    assert "Claims is required" not in answer.text
    assert "too long" in answer.text
