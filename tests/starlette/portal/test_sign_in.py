"""Signing in to the portal: the same tokens and roles as the admin API, kept in a cookie."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2

from esra.starlette._portal.notices import NOTICE_COOKIE
from esra.starlette._portal.session import SESSION_COOKIE, SIGN_IN_COOKIE
from tests.starlette._tls_proxy import behind_tls_proxy
from tests.starlette._tokens import NOW, other_idp
from tests.starlette.portal._site import (
    csrf_of,
    http,
    manager_token,
    open_site,
    reader_token,
    sign_in,
    token_for,
)


def _query(location: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(location).query)


async def test_anonymous_visitor_is_sent_to_sign_in(tmp_path: Path) -> None:
    """Every page answers an anonymous visitor with 303 to the sign-in form, keeping the page."""
    async with open_site(tmp_path) as site, http(site) as client:
        for path in (
            "/portal/",
            "/portal/status",
            "/portal/documents?state=failed",
            "/portal/upload",
        ):
            response = await client.get(path)
            assert response.status_code == 303, path
            location = response.headers["location"]
            assert urlsplit(location).path == "/portal/sign-in"
            assert _query(location)["next"] == [path]
        posted = await client.post("/portal/upload")
        assert posted.status_code == 303
        assert "next" not in _query(posted.headers["location"])


async def test_sign_in_keeps_the_token_in_a_strict_http_only_cookie(tmp_path: Path) -> None:
    """A valid manager token signs in; the cookie is HttpOnly, SameSite=Strict, portal-scoped."""
    async with open_site(tmp_path) as site, http(site) as client:
        response = await sign_in(client, manager_token(), next_path="/portal/status")
        assert response.status_code == 303
        assert response.headers["location"] == "/portal/status"
        cookie = next(
            c for c in response.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE)
        )
        attributes = {part.strip().lower() for part in cookie.split(";")}
        assert {"httponly", "samesite=strict", "path=/portal"} <= attributes
        assert "secure" not in attributes  # plain http here
        status = await client.get("/portal/status")
        assert status.status_code == 200
        assert "Signed in as <strong>mara</strong>" in status.text


async def test_session_cookie_is_secure_over_https(tmp_path: Path) -> None:
    """Served over https, the session cookie carries Secure."""
    async with open_site(tmp_path) as site, http(site, base_url="https://portal.test") as client:
        response = await sign_in(client, manager_token())
        cookie = next(
            c for c in response.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE)
        )
        assert "secure" in {part.strip().lower() for part in cookie.split(";")}


async def test_forced_secure_cookies_cover_the_notice_cookie_too(tmp_path: Path) -> None:
    """Behind a TLS-terminating proxy the portal sees plain http; ``secure_cookies=True``
    marks every cookie it sets Secure — the notice one after a saved change included."""
    async with open_site(tmp_path, secure_cookies=True) as site:
        transport = httpx2.ASGITransport(app=behind_tls_proxy(site.app))
        async with httpx2.AsyncClient(
            transport=transport, base_url="https://portal.test"
        ) as client:
            await sign_in(client, manager_token())
            status = await client.get("/portal/status")
            form = {
                "csrf": csrf_of(status),
                "revision": "0",
                "scan_policy": "quarantine",
                "max_attempts": "3",
                "batch_per_tenant": "20",
            }
            saved = await client.post("/portal/status/settings", data=form)
    assert saved.status_code == 303
    notice = next(c for c in saved.headers.get_list("set-cookie") if c.startswith(NOTICE_COOKIE))
    assert "secure" in {part.strip().lower() for part in notice.split(";")}


async def test_refused_tokens_do_not_sign_in(tmp_path: Path) -> None:
    """An untrusted issuer, garbage or an expired token is refused on the form, no session."""
    expired = token_for("mara", "ESRA_DATA_MANAGE", exp=int((NOW - timedelta(hours=1)).timestamp()))
    untrusted = other_idp().token(
        sub="mara", esra_tenant="larkspur", esra_roles=["ESRA_DATA_MANAGE"]
    )
    async with open_site(tmp_path) as site, http(site) as client:
        for token, words in (
            (untrusted, "not accepted"),
            ("not-a-token", "not accepted"),
            (expired, "expired"),
        ):
            response = await sign_in(client, token)
            assert response.status_code == 400
            assert words in response.text
            assert SESSION_COOKIE not in client.cookies


async def test_a_token_without_an_esra_role_is_refused(tmp_path: Path) -> None:
    """A verified token whose roles claim names no ESRA & Data role gets 403."""
    async with open_site(tmp_path) as site, http(site) as client:
        response = await sign_in(client, token_for("sam", "GOVERNANCE_MANAGE"))
        assert response.status_code == 403
        assert "no ESRA &amp; Data role" in response.text
        assert SESSION_COOKIE not in client.cookies


async def test_sign_in_without_the_form_nonce_is_refused(tmp_path: Path) -> None:
    """A sign-in posted from elsewhere (no nonce cookie) cannot start a session."""
    async with open_site(tmp_path) as site, http(site) as client:
        response = await client.post(
            "/portal/sign-in", data={"nonce": "guessed", "token": manager_token()}
        )
        assert response.status_code == 400
        assert SESSION_COOKIE not in client.cookies
        assert SIGN_IN_COOKIE in response.headers.get("set-cookie", "")


async def test_sign_in_never_redirects_off_the_portal(tmp_path: Path) -> None:
    """A ``next`` outside the portal is ignored: the visitor lands on the portal's home."""
    async with open_site(tmp_path) as site, http(site) as client:
        for target in ("https://evil.test/", "//evil.test/x", "/elsewhere", "/\\evil.test"):
            response = await sign_in(client, manager_token(), next_path=target)
            assert response.headers["location"] == "/portal/", target


_ESCAPING_TARGETS = (
    "/portal/../admin/v1/store",
    "/portal/./../admin/v1/store",
    "/portal/documents/../../admin/v1/store",
    "/portal/%2e%2e/admin/v1/store",
    "/portal/%2E%2E/admin/v1/store",
    "/portal/.%2e/admin/v1/store",
    "/portal/%2e./admin/v1/store",
    "/portal%2f..%2fadmin/v1/store",
    "/portal/..%2fadmin/v1/store",
    "/portal/..%5cadmin/v1/store",
    "/portal/..\\admin/v1/store",
    "/portal\\..\\admin",
    "/portal//evil.test/x",
    "//evil.test/portal/",
    "/portal/%0d%0aSet-Cookie:x=1",
    "/portal/\tx",
    "/portal/%zz",
    "/portal/\u202e",
)


async def test_sign_in_never_follows_dot_segments_or_encoded_escapes(tmp_path: Path) -> None:
    """Issue 13 item 7: ``next=/portal/../admin/v1/store`` was followed; every spelling of a
    way out of /portal (dot segments, %2e, encoded or back slashes, ``//``, control
    characters) now lands on the portal's home, and the form does not carry it along."""
    async with open_site(tmp_path) as site, http(site) as client:
        for target in _ESCAPING_TARGETS:
            response = await sign_in(client, manager_token(), next_path=target)
            assert response.status_code == 303, target
            assert response.headers["location"] == "/portal/", target
            form = await client.get("/portal/sign-in", params={"next": target})
            assert 'name="next" value=""' in form.text, target
        kept = await sign_in(client, manager_token(), next_path="/portal/documents?state=failed")
        assert kept.headers["location"] == "/portal/documents?state=failed"


async def test_expired_or_tampered_session_sends_back_to_sign_in(tmp_path: Path) -> None:
    """A session whose token stopped verifying ends: 303 to sign-in saying why, cookie dropped."""
    expired = token_for("mara", "ESRA_DATA_MANAGE", exp=int((NOW - timedelta(hours=1)).timestamp()))
    tampered = manager_token()[:-4] + "AAAA"
    async with open_site(tmp_path) as site:
        for token, reason in ((expired, "expired"), (tampered, "rejected")):
            async with http(site) as client:
                client.cookies.set(SESSION_COOKIE, token, domain="127.0.0.1", path="/portal")
                response = await client.get("/portal/documents")
                assert response.status_code == 303
                assert _query(response.headers["location"])["ended"] == [reason]
                assert f'{SESSION_COOKIE}=""' in response.headers["set-cookie"]
                follow = await client.get(response.headers["location"])
                assert follow.status_code == 200
                assert "Sign in" in follow.text


async def test_sign_out_needs_the_session_csrf_token(tmp_path: Path) -> None:
    """Sign-out with the page's CSRF token ends the session; without it, it is refused."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, reader_token())
        page = await client.get("/portal/status")
        refused = await client.post("/portal/sign-out", data={"csrf": "forged"})
        assert refused.status_code == 403
        assert (await client.get("/portal/status")).status_code == 200
        done = await client.post("/portal/sign-out", data={"csrf": csrf_of(page)})
        assert done.status_code == 303
        assert (await client.get("/portal/status")).status_code == 303


async def test_an_oversized_form_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """The sign-in form is open to anyone, so a body over 64 KiB is refused (413)."""
    async with open_site(tmp_path) as site, http(site) as client:
        response = await client.post("/portal/sign-in", data={"token": "x" * 70_000})
        assert response.status_code == 413
        assert "larger than any portal form" in response.text
