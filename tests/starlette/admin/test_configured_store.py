"""A configured deployment's store: Disabled until an administrator enables and initialises it.

``esra serve --config`` with a document-store source whose file does not exist yet: the host
starts, the store is Disabled, and only the admin API's enable → initialise makes it Ready —
nothing initialises it implicitly. Then it takes uploads like any store.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx2

from esra.core._clock import SystemClock
from esra.core.config import dump_snapshot
from esra.core.testing import InMemoryAuditSink
from esra.starlette._demo.build import build_demo_databases
from esra.starlette._demo.config import demo_snapshot
from esra.starlette._embedded import embedded_snapshot
from esra.starlette._host import build_app
from esra.starlette._parts import open_configured
from esra.starlette._settings import load_settings
from esra.starlette._stores import open_tenant_stores, schema_present
from tests.starlette._tls_proxy import behind_tls_proxy
from tests.starlette._tokens import AUDIENCE, ISSUER, idp
from tests.starlette._world import BASE


def _deployment(directory: Path) -> Path:
    (directory / "jwks.json").write_text(json.dumps(idp().jwks()))
    (directory / "tenant.json").write_text(json.dumps(dump_snapshot(embedded_snapshot())))
    data = directory / "data"
    data.mkdir()
    build_demo_databases(data, demo_snapshot())
    settings = directory / "esra.toml"
    settings.write_text(
        f'[[issuers]]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\njwks_file = "jwks.json"\n'
        '[[tenants]]\nid = "larkspur"\nconfig = "tenant.json"\ndatabases = "data"\n'
    )
    return settings


async def test_a_configured_store_is_initialised_only_by_an_administrator(tmp_path: Path) -> None:
    """Disabled at start (no file); enable → initialise → Ready; the file now has the schema."""
    settings = load_settings(_deployment(tmp_path))
    store_file = tmp_path / "data" / "document-store"
    # The host runs on the system clock here, so the token is valid now.
    now = int(time.time())
    manager = idp().token(
        sub="ops",
        esra_tenant="larkspur",
        esra_roles="ESRA_DATA_MANAGE",
        iat=now,
        nbf=now,
        exp=now + 600,
    )
    audit = InMemoryAuditSink()
    async with (
        open_configured(settings) as parts,
        open_tenant_stores(parts.stores, audit=audit, clock=SystemClock()) as stores,
    ):
        app = build_app(parts, host="127.0.0.1", port=8000, audit=audit, stores=stores)
        async with (
            app.router.lifespan_context(app),
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app),
                base_url=BASE,
                headers={"Authorization": f"Bearer {manager}"},
            ) as client,
        ):
            assert (await client.get("/admin/v1/store")).json()["status"] == "disabled"
            assert not store_file.exists()
            assert (await client.post("/admin/v1/store/enable")).json()["status"] == "enabled"
            started = await client.post("/admin/v1/store/initialise")
            assert started.status_code == 202
            await stores["larkspur"].lifecycle.wait()
            assert (await client.get("/admin/v1/store")).json()["status"] == "ready"
            uploaded = await client.post(
                "/admin/v1/store/documents",
                files=[("files", ("note.md", b"# Saddles\n\nMeasure sit bones.\n", None))],
            )
            assert uploaded.json()["stored"] == 1
    assert schema_present(store_file)


async def test_an_https_resource_url_makes_the_portal_cookies_secure(tmp_path: Path) -> None:
    """Behind a TLS-terminating proxy the host sees plain http, but its settings name its
    public https address: the portal's session cookie is Secure all the same."""
    path = _deployment(tmp_path)
    path.write_text(
        '[server]\nresource_url = "https://search.example.com/mcp"\n' + path.read_text()
    )
    settings = load_settings(path)
    now = int(time.time())
    manager = idp().token(
        sub="ops", esra_tenant="larkspur", esra_roles="ESRA_DATA_MANAGE", iat=now, exp=now + 600
    )
    async with (
        open_configured(settings) as parts,
        open_tenant_stores(parts.stores, audit=InMemoryAuditSink(), clock=SystemClock()) as stores,
    ):
        app = build_app(parts, host="127.0.0.1", port=8000, stores=stores)
        async with (
            app.router.lifespan_context(app),
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=behind_tls_proxy(app)),
                base_url="https://127.0.0.1:8000",
            ) as client,
        ):
            form = await client.get("/portal/sign-in")
            nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
            assert nonce is not None, form.text
            signed_in = await client.post(
                "/portal/sign-in", data={"nonce": nonce.group(1), "token": manager, "next": ""}
            )
    assert signed_in.status_code == 303
    session = next(c for c in signed_in.headers.get_list("set-cookie") if "session" in c)
    assert "secure" in {part.strip().lower() for part in session.split(";")}
