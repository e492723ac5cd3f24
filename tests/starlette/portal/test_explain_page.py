"""``/portal/explain``: an operator explains a search from the portal; others are refused.

The page answers to ``ESRA_EXPOSURE_MANAGE`` only (a data reader or manager gets 403, and
the refusal is recorded as ``esra.explain``); the form is CSRF-checked; the answer shows the
pipeline's decisions as tables, and the page escapes what the caller's question says.
"""

from __future__ import annotations

from pathlib import Path

from esra.core._admin.explaining import ExplainService
from esra.core._retriever import Retriever
from esra.core.codes import AuditEvent
from esra.core.testing import (
    FakeClock,
    FakeLanguageModel,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemorySearchProvider,
)
from tests.core.factories import CLIENT_APP, SLUG, make_snapshot, make_source
from tests.starlette.portal._site import (
    TENANT,
    csrf_of,
    http,
    manager_token,
    open_site,
    reader_token,
    sign_in,
    token_for,
)

ROWS = {"m-s-1": [{"col_id": 7, "col_title": "Parental leave", "col_body": "Sixteen weeks"}]}
HOSTILE = "<script>alert('x')</script> leave"


def _explainer(audit: InMemoryAuditSink) -> ExplainService:
    snapshot = make_snapshot([make_source("s-1", tenant_id=TENANT)], tenant_id=TENANT)
    retriever = Retriever(
        config=InMemoryConfigRepository([snapshot]),
        providers={"s-1": InMemorySearchProvider(ROWS)},
        model=FakeLanguageModel(),
        audit=audit,
        clock=FakeClock(),
        tenant_id=TENANT,
    )
    return ExplainService({TENANT: retriever}, audit=audit, clock=FakeClock())


def _tuner_token() -> str:
    return token_for("tess", "ESRA_EXPOSURE_MANAGE")


async def test_an_operator_explains_a_search_from_the_portal(tmp_path: Path) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        await sign_in(client, _tuner_token())
        form = await client.get("/portal/explain")
        assert form.status_code == 200
        assert 'href="/portal/explain" aria-current="page"' in form.text
        answer = await client.post(
            "/portal/explain",
            data={
                "csrf": csrf_of(form),
                "exposure": SLUG,
                "question": HOSTILE,
                "subject": "alice",
                "client_app": CLIENT_APP,
                "claims": "region=emea\ngroups=hr\ngroups=payroll",
            },
        )
    assert answer.status_code == 200
    for heading in ("Stages", "Decisions", "Plans", "Validation", "Statements", "Final order"):
        assert f"<h2>{heading}</h2>" in answer.text or f"<h2>{heading} (" in answer.text
    assert "esra.sources.resolve" in answer.text
    assert "<script>alert" not in answer.text
    (record,) = audit.events(AuditEvent.EXPLAIN)
    assert (record.outcome, record.dimensions["explained_subject"]) == ("ok", "alice")


async def test_the_page_is_refused_without_the_role(tmp_path: Path) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        for bearer in (reader_token(), manager_token()):
            await sign_in(client, bearer)
            refused = await client.get("/portal/explain")
            assert refused.status_code == 403
            assert 'href="/portal/explain"' not in refused.text
    assert [r.outcome for r in audit.events(AuditEvent.EXPLAIN)] == ["denied", "denied"]


async def test_a_form_without_the_sessions_csrf_token_is_refused(tmp_path: Path) -> None:
    audit = InMemoryAuditSink()
    async with open_site(tmp_path, explainer=_explainer(audit)) as site, http(site) as client:
        await sign_in(client, _tuner_token())
        forged = await client.post(
            "/portal/explain",
            data={"csrf": "forged", "exposure": SLUG, "question": "leave", "subject": "a",
                  "client_app": CLIENT_APP},
        )  # fmt: skip
    assert forged.status_code == 403
    assert audit.events(AuditEvent.EXPLAIN) == []
