"""The portal's tenant chooser: cross-tenant roles pick the tenant, the session keeps it.

The site's only store is tenant ``larkspur``'s. An operator of tenant ``harbor`` (no store)
holding ``ESRA_DATA_READ`` with no tenant signs in, chooses larkspur, and reviews its
documents; what it tries there is audited as cross-tenant.
"""

from __future__ import annotations

from pathlib import Path

from esra.core.codes import AuditEvent
from esra.starlette._portal.session import TENANT_COOKIE
from tests.starlette.portal._site import (
    TENANT,
    csrf_of,
    http,
    manager_token,
    open_site,
    sign_in,
    token_for,
)

HOME = "harbor"


def _cross_reader() -> str:
    return token_for("ines", tenant=HOME, esra_cross_tenant_roles=["ESRA_DATA_READ"])


async def test_a_cross_tenant_reader_chooses_a_tenant_and_reviews_its_store(
    tmp_path: Path,
) -> None:
    """Sign-in leads to the chooser; after choosing, documents and status are larkspur's."""
    async with open_site(tmp_path) as site, http(site) as client:
        document_id = await site.upload("leave.txt", b"Leave policy: 28 days.\n")
        signed_in = await sign_in(client, _cross_reader())
        assert signed_in.headers["location"] == "/portal/tenant"
        home = await client.get("/portal/documents")
        assert home.status_code == 404  # harbor has no store here; the page offers the way on
        assert 'href="/portal/tenant"' in home.text
        chooser = await client.get("/portal/tenant")
        assert chooser.status_code == 200
        assert f'name="tenant" value="{TENANT}"' in chooser.text
        chosen = await client.post(
            "/portal/tenant", data={"csrf": csrf_of(chooser), "tenant": TENANT}
        )
        assert (chosen.status_code, chosen.headers["location"]) == (303, "/portal/status")
        documents = await client.get("/portal/documents")
        assert documents.status_code == 200
        assert document_id in documents.text
        assert f"tenant <strong>{TENANT}</strong>" in documents.text
        # Reading only: the upload page is refused.
        upload_page = await client.get("/portal/upload")
        assert upload_page.status_code == 403


async def test_a_refused_action_in_the_chosen_tenant_is_audited_as_cross_tenant(
    tmp_path: Path,
) -> None:
    """Enable needs ESRA_DATA_MANAGE; the denial lands in larkspur's audit with harbor."""
    async with open_site(tmp_path, ready=False) as site, http(site) as client:
        await sign_in(client, _cross_reader())
        chooser = await client.get("/portal/tenant")
        await client.post("/portal/tenant", data={"csrf": csrf_of(chooser), "tenant": TENANT})
        status = await client.get("/portal/status")
        refused = await client.post("/portal/status/enable", data={"csrf": csrf_of(status)})
        assert refused.status_code == 403
        (record,) = site.audit.events(AuditEvent.STORE_ENABLE)
        assert (record.outcome, record.tenant_id) == ("denied", TENANT)
        assert record.dimensions["cross_tenant"] is True
        assert record.dimensions["operator_tenant"] == HOME


async def test_a_tenant_not_offered_is_refused_alike_whether_or_not_it_exists(
    tmp_path: Path,
) -> None:
    """Only tenants with a store the token may read are choosable; others answer one page."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, _cross_reader())
        chooser = await client.get("/portal/tenant")
        csrf = csrf_of(chooser)
        unknown = await client.post("/portal/tenant", data={"csrf": csrf, "tenant": "nowhere"})
        own = await client.post("/portal/tenant", data={"csrf": csrf, "tenant": HOME})
        assert unknown.status_code == own.status_code == 403
        assert unknown.text == own.text
        assert TENANT_COOKIE not in client.cookies
        forged = await client.post("/portal/tenant", data={"csrf": "forged", "tenant": TENANT})
        assert forged.status_code == 403
        assert TENANT_COOKIE not in client.cookies


async def test_a_forged_or_foreign_tenant_cookie_is_ignored(tmp_path: Path) -> None:
    """The choice is sealed by the session's token: a hand-made cookie, or one kept from
    another session, acts on the token's own tenant."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, _cross_reader())
        chooser = await client.get("/portal/tenant")
        await client.post("/portal/tenant", data={"csrf": csrf_of(chooser), "tenant": TENANT})
        sealed = client.cookies[TENANT_COOKIE]
        encoded, _seal = sealed.split(".")

        async def documents_with(cookie: str, token: str) -> int:
            async with http(site) as browser:
                await sign_in(browser, token)
                browser.cookies.set(TENANT_COOKIE, cookie)
                return (await browser.get("/portal/documents")).status_code

        # The genuine cookie in the same session's hands works (so the cookie is sent) ...
        assert await documents_with(sealed, _cross_reader()) == 200
        # ... a hand-made seal does not, nor the genuine one under another session's token.
        assert await documents_with(f"{encoded}.{'0' * 64}", _cross_reader()) == 404
        assert await documents_with("not-a-choice", _cross_reader()) == 404
        other = token_for("ines-2", tenant=HOME, esra_cross_tenant_roles=["ESRA_DATA_READ"])
        assert await documents_with(sealed, other) == 404


async def test_own_tenant_operators_are_offered_no_chooser(tmp_path: Path) -> None:
    """A token with roles on its own tenant only sees no switch and cannot choose."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        documents = await client.get("/portal/documents")
        assert 'href="/portal/tenant"' not in documents.text
        assert (await client.get("/portal/tenant")).status_code == 403
        refused = await client.post(
            "/portal/tenant", data={"csrf": csrf_of(documents), "tenant": TENANT}
        )
        assert refused.status_code == 403
        assert "set-cookie" not in refused.headers
