"""The store status page: enable, initialise in the background, poll while Initializing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.applications import Starlette
from starlette.routing import Mount

from esra.core._docstore.lifecycle import StoreInitialisationError, StoreStatus
from esra.core.codes import AuditEvent
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.starlette._auth import JwtVerifier
from esra.starlette._portal import portal_app
from tests.starlette._tokens import NOW, idp
from tests.starlette.portal._site import (
    Site,
    csrf_of,
    http,
    manager_token,
    open_site,
    reader_token,
    sign_in,
    sqlite_repository,
    token_for,
)

REFRESH = '<meta http-equiv="refresh" content="2">'


async def test_store_not_ready_shows_status_and_refuses_documents(tmp_path: Path) -> None:
    """A Disabled store: home leads to status, which offers Enable; documents are 409."""
    async with open_site(tmp_path, ready=False) as site, http(site) as client:
        await sign_in(client, manager_token())
        home = await client.get("/portal/")
        assert home.headers["location"] == "/portal/status"
        status = await client.get("/portal/status")
        assert ">Disabled</span>" in status.text
        assert 'action="/portal/status/enable"' in status.text
        for path in ("/portal/documents", "/portal/upload"):
            refused = await client.get(path)
            assert refused.status_code == 409
            assert 'href="/portal/status"' in refused.text


async def test_initializing_is_shown_and_polled_until_ready(tmp_path: Path) -> None:
    """While initialisation runs the page refreshes itself; once Ready it stops and counts."""
    gate = asyncio.Event()
    site: Site

    async def slow_schema() -> None:
        await gate.wait()
        await sqlite_repository(site.store).initialize()

    async with (
        open_site(tmp_path, ready=False, initialiser=slow_schema) as site,
        http(site) as client,
    ):
        await sign_in(client, manager_token())
        page = await client.get("/portal/status")
        enabled = await client.post("/portal/status/enable", data={"csrf": csrf_of(page)})
        assert enabled.headers["location"] == "/portal/status"
        page = await client.get("/portal/status")
        assert ">Enabled</span>" in page.text
        assert "The document store is enabled" in page.text  # the notice, once
        started = await client.post("/portal/status/initialise", data={"csrf": csrf_of(page)})
        assert started.status_code == 303
        polling = await client.get("/portal/status")
        assert ">Initializing</span>" in polling.text
        assert REFRESH in polling.text
        again = await client.post("/portal/status/initialise", data={"csrf": csrf_of(page)})
        assert again.status_code == 409
        gate.set()
        await site.store.lifecycle.wait()
        ready = await client.get("/portal/status")
        assert ">Ready</span>" in ready.text
        assert REFRESH not in ready.text
        assert "Quarantined: <strong>0</strong>" in ready.text


async def test_failed_initialisation_shows_reason_and_remedy(tmp_path: Path) -> None:
    """A failed initialisation shows its classified reason, the remedy and Initialise again."""

    async def unwritable() -> None:
        raise StoreInitialisationError("database_unavailable", "Make the directory writable.")

    async with (
        open_site(tmp_path, ready=False, initialiser=unwritable) as site,
        http(site) as client,
    ):
        await sign_in(client, manager_token())
        page = await client.get("/portal/status")
        await client.post("/portal/status/enable", data={"csrf": csrf_of(page)})
        await client.post("/portal/status/initialise", data={"csrf": csrf_of(page)})
        assert (await site.store.lifecycle.wait()).status is StoreStatus.FAILED
        failed = await client.get("/portal/status")
        assert ">Failed</span>" in failed.text
        assert "<code>database_unavailable</code>" in failed.text
        assert "Make the directory writable." in failed.text
        assert "Initialise again" in failed.text


async def test_reader_cannot_enable_and_the_denial_is_audited(tmp_path: Path) -> None:
    """A reader sees the status but no button; a forged enable is 403 and audited."""
    async with open_site(tmp_path, ready=False) as site, http(site) as client:
        await sign_in(client, reader_token())
        page = await client.get("/portal/status")
        assert "/status/enable" not in page.text
        assert "must take the next step" in page.text
        refused = await client.post("/portal/status/enable", data={"csrf": csrf_of(page)})
        assert refused.status_code == 403
        (denial,) = site.audit.events(AuditEvent.STORE_ENABLE)
        assert denial.outcome == "denied"
        assert denial.dimensions["operator"] == "rafael"
        assert site.store.lifecycle.current.status is StoreStatus.DISABLED


async def test_tenant_without_a_store_is_told_so(tmp_path: Path) -> None:
    """An operator of a tenant this host keeps no store for gets a 404 page, not an error."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, token_for("olga", "ESRA_DATA_MANAGE", tenant="other"))
        page = await client.get("/portal/status")
        assert page.status_code == 404
        assert "no document store for tenant other" in page.text


async def test_portal_serves_at_any_mount_path(tmp_path: Path) -> None:
    """Links and cookies follow the mount path (here /admin/portal), never a fixed one."""
    async with open_site(tmp_path) as site:
        clock = FakeClock(NOW)
        portal = portal_app(
            stores={"larkspur": site.store}, verifier=JwtVerifier([idp().trusted()], clock=clock)
        )
        nested = Starlette(routes=[Mount("/admin/portal", app=portal)])
        elsewhere = Site(app=nested, store=site.store, audit=InMemoryAuditSink(), clock=clock)
        async with http(elsewhere) as client:
            form = await client.get("/admin/portal/sign-in")
            assert 'action="/admin/portal/sign-in"' in form.text
            assert "Path=/admin/portal" in form.headers["set-cookie"]
