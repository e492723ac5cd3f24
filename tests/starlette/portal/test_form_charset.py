"""A form body declaring a charset of its own is refused, never decoded into a crash.

Starlette decodes ``multipart/form-data`` fields with whatever codec the body's
``Content-Type`` names. UTF-7 (or ``unicode_escape``) turns a few ASCII bytes into a lone
surrogate, which no later step can encode: the CSRF and sign-in nonce comparisons, the token
verifier and the explain service all raised ``UnicodeEncodeError`` — a 500 for anyone,
signed in or not (the sign-in form is open to everyone). Browsers never declare a charset on
a multipart form, so one naming anything but UTF-8 is refused (415) before it is parsed.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
from starlette.applications import Starlette

from esra.core.codes import AuditEvent
from esra.core.testing import InMemoryAuditSink
from tests.core.factories import CLIENT_APP, SLUG
from tests.starlette.portal._site import csrf_of, manager_token, open_site, sign_in
from tests.starlette.portal.test_explain_page import _explainer, _tuner_token

_BOUNDARY = "esra-hostile-boundary"
# "+2AA-" is UTF-7 for the lone surrogate U+D800.
_SURROGATE = b"+2AA-"
_NONCE = re.compile(r'name="nonce" value="([^"]+)"')


def _multipart(
    fields: dict[str, bytes], *, charset: str, files: tuple[tuple[str, bytes], ...] = ()
) -> tuple[bytes, dict[str, str]]:
    parts = [
        f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        + value
        + b"\r\n"
        for name, value in fields.items()
    ]
    parts += [
        f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
        "Content-Type: text/plain\r\n\r\n".encode()
        + data
        + b"\r\n"
        for name, data in files
    ]
    parts.append(f"--{_BOUNDARY}--\r\n".encode())
    content_type = f"multipart/form-data; boundary={_BOUNDARY}; charset={charset}"
    return b"".join(parts), {"content-type": content_type}


def _client(app: Starlette) -> httpx2.AsyncClient:
    # A 500 comes back as the portal's page instead of being raised into the test.
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000")


async def test_an_anonymous_sign_in_in_utf7_is_refused_not_a_500(tmp_path: Path) -> None:
    async with open_site(tmp_path) as site, _client(site.app) as client:
        form = await client.get("/portal/sign-in")
        match = _NONCE.search(form.text)
        assert match
        for fields in (
            {"nonce": _SURROGATE, "token": b"x"},
            {"nonce": match.group(1).encode(), "token": _SURROGATE},
        ):
            body, headers = _multipart(fields, charset="utf-7")
            answer = await client.post("/portal/sign-in", content=body, headers=headers)
            assert answer.status_code == 415, answer.text
            assert "esra_portal_session" not in answer.headers.get("set-cookie", "")


async def test_a_signed_in_form_in_utf7_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async with open_site(tmp_path, ready=False) as site, _client(site.app) as client:
        await sign_in(client, manager_token())
        for path in ("/portal/status/enable", "/portal/sign-out"):
            body, headers = _multipart({"csrf": _SURROGATE}, charset="utf-7")
            answer = await client.post(path, content=body, headers=headers)
            assert answer.status_code == 415, (path, answer.text)
        assert site.store.lifecycle.current.status.value == "disabled"


async def test_an_upload_in_utf7_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    async with open_site(tmp_path) as site, _client(site.app) as client:
        await sign_in(client, manager_token())
        csrf = csrf_of(await client.get("/portal/upload"))
        for csrf_value in (_SURROGATE, csrf.encode()):
            body, headers = _multipart(
                {"csrf": csrf_value}, charset="utf-7", files=(("notes.txt", b"Some notes.\n"),)
            )
            answer = await client.post("/portal/upload", content=body, headers=headers)
            assert answer.status_code == 415, answer.text
        listed = await client.get("/portal/documents")
        assert "notes.txt" not in listed.text


async def test_an_upload_declaring_utf8_is_still_read(tmp_path: Path) -> None:
    async with open_site(tmp_path) as site, _client(site.app) as client:
        await sign_in(client, manager_token())
        csrf = csrf_of(await client.get("/portal/upload"))
        body, headers = _multipart(
            {"csrf": csrf.encode()}, charset="UTF-8", files=(("notes.txt", b"Some notes.\n"),)
        )
        answer = await client.post("/portal/upload", content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert "1 files: 1 stored" in answer.text


async def test_an_explain_in_utf7_is_refused_and_not_run(tmp_path: Path) -> None:
    audit = InMemoryAuditSink()
    async with (
        open_site(tmp_path, explainer=_explainer(audit)) as site,
        _client(site.app) as client,
    ):
        await sign_in(client, _tuner_token())
        csrf = csrf_of(await client.get("/portal/explain"))
        fields = {
            "csrf": csrf.encode(),
            "exposure": SLUG.encode(),
            "question": b"leave",
            "subject": _SURROGATE,
            "client_app": CLIENT_APP.encode(),
        }
        body, headers = _multipart(fields, charset="utf-7")
        answer = await client.post("/portal/explain", content=body, headers=headers)
    assert answer.status_code == 415, answer.text
    assert audit.events(AuditEvent.EXPLAIN) == []
