"""Form and upload bodies are bounded by the bytes that arrive, not by what they declare.

portal.md: "A form body must declare its length and stay under 64 KiB (the sign-in form is
open to anyone …)". A server may frame a body other than by its ``Content-Length``: uvicorn's
h11 parser (``esra serve`` without the speedups extra) frames a request that also carries
``Transfer-Encoding: chunked`` as chunked, so a declared length proves nothing about the
body. Such a request is refused outright (400), and every body is counted as it arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import uvicorn

from esra.starlette._portal import upload_pages
from esra.starlette._portal.access import MAX_FORM_BYTES
from esra.starlette._serve import free_port
from tests.starlette.portal._site import (
    Site,
    csrf_of,
    http,
    manager_token,
    open_site,
    sign_in,
)

_NONCE = re.compile(r'name="nonce" value="([^"]+)"')
_BOUNDARY = "esra-test-boundary"
POLICY = b"# Travel policy\n\nBook travel two weeks ahead.\n"


@contextlib.asynccontextmanager
async def _h11_server(site: Site) -> AsyncIterator[str]:
    """``site`` served by a real uvicorn on this loop with the h11 parser; its base URL."""
    port = free_port()
    config = uvicorn.Config(
        site.app, host="127.0.0.1", port=port, http="h11", lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(500):
            if server.started or serving.done():
                break
            await asyncio.sleep(0.01)
        assert server.started
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving, 30)


async def _exchange(base: str, head: bytes, body: bytes) -> bytes:
    """Send ``head`` and ``body`` over a raw connection (tolerating the server closing it
    early), then read the answer to the end."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head)
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(body), 65536):
                writer.write(body[start : start + 65536])
                await writer.drain()
            writer.write_eof()
        answer = b""
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), 30):
                answer += chunk
        return answer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def _chunked(body: bytes) -> bytes:
    pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def _smuggling_head(path: str, base: str, content_type: str, cookies: str) -> bytes:
    """A request head declaring a 10-byte body while framing it chunked."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: {base.removeprefix('http://')}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: 10\r\n"
        f"Transfer-Encoding: chunked\r\nCookie: {cookies}\r\nConnection: close\r\n\r\n"
    ).encode()


def _status(answer: bytes) -> int:
    return int(answer.split(b"\r\n", 1)[0].split()[1])


def _cookie_header(client: httpx2.AsyncClient) -> str:
    return "; ".join(f"{name}={value}" for name, value in client.cookies.items())


def _multipart(csrf: str, files: list[tuple[str, bytes]]) -> bytes:
    parts = [
        f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{csrf}\r\n'.encode()
    ]
    for name, data in files:
        parts.append(
            f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="files"; '
            f'filename="{name}"\r\nContent-Type: text/plain\r\n\r\n'.encode()
            + data
            + b"\r\n"
        )
    parts.append(f"--{_BOUNDARY}--\r\n".encode())
    return b"".join(parts)


async def test_a_sign_in_declaring_a_length_but_framed_chunked_is_refused(
    tmp_path: Path,
) -> None:
    """Under h11: Content-Length 10, a chunked 3.6 MB body carrying a valid sign-in; 400,
    and no session is started from it."""
    async with open_site(tmp_path) as site, _h11_server(site) as base:
        async with httpx2.AsyncClient(base_url=base) as client:
            # The control: a normal sign-in over the same server starts a session.
            control = await sign_in(client, manager_token())
            assert control.status_code == 303
            assert "esra_portal_session" in control.cookies
        async with httpx2.AsyncClient(base_url=base) as client:
            form = await client.get("/portal/sign-in")
            nonce_match = _NONCE.search(form.text)
            assert nonce_match
            nonce = nonce_match.group(1)
            cookies = _cookie_header(client)
        # Four fields just under the form parser's 1 MiB per field: 3.6 MB in all.
        padding = b"&".join(b"pad%d=" % i + b"a" * 900_000 for i in range(4))
        body = padding + f"&nonce={nonce}&token={manager_token()}".encode()
        head = _smuggling_head(
            "/portal/sign-in", base, "application/x-www-form-urlencoded", cookies
        )
        answer = await _exchange(base, head, _chunked(body))
    assert _status(answer) == 400, answer[:200]
    assert b"esra_portal_session=" not in answer


async def test_an_upload_declaring_a_length_but_framed_chunked_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under h11: Content-Length 10, a chunked body over the upload limit; 400, nothing
    stored — while a normal upload over the same server is stored."""
    monkeypatch.setattr(upload_pages, "MAX_UPLOAD_BYTES", 64 * 1024)
    async with open_site(tmp_path) as site, _h11_server(site) as base:
        async with httpx2.AsyncClient(base_url=base) as client:
            await sign_in(client, manager_token())
            csrf = csrf_of(await client.get("/portal/upload"))
            control = await client.post(
                "/portal/upload",
                data={"csrf": csrf},
                files=[("files", ("travel.md", POLICY, "text/markdown"))],
            )
            assert control.status_code == 200, control.text
            assert "1 files: 1 stored, 0 refused." in control.text
            cookies = _cookie_header(client)
        body = _multipart(csrf, [("big.txt", b"words " * (256 * 1024))])
        head = _smuggling_head(
            "/portal/upload", base, f"multipart/form-data; boundary={_BOUNDARY}", cookies
        )
        answer = await _exchange(base, head, _chunked(body))
        assert _status(answer) == 400, answer[:200]
        titles = [document.title for document in await site.store.repository.list("larkspur")]
    assert titles == ["travel.md"]


async def test_a_form_body_longer_than_declared_is_counted_as_it_arrives(
    tmp_path: Path,
) -> None:
    """A server that delivers more than the declared length (no Transfer-Encoding to give
    it away): the form is refused at 64 KiB of received bytes, before it is parsed."""
    async with open_site(tmp_path) as site, http(site) as client:
        form = await client.get("/portal/sign-in")
        nonce_match = _NONCE.search(form.text)
        assert nonce_match
        body = (
            b"pad="
            + b"a" * (2 * MAX_FORM_BYTES)
            + f"&nonce={nonce_match.group(1)}&token={manager_token()}".encode()
        )
        response = await client.post(
            "/portal/sign-in",
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "10"},
        )
        assert response.status_code == 413
        assert "larger than any portal form" in response.text
        assert "esra_portal_session" not in response.cookies


async def test_an_upload_body_longer_than_declared_is_counted_as_it_arrives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upload limit counts received bytes too: a body past it is refused (413) and
    nothing is stored, whatever its Content-Length said."""
    monkeypatch.setattr(upload_pages, "MAX_UPLOAD_BYTES", 64 * 1024)
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        csrf = csrf_of(await client.get("/portal/upload"))
        response = await client.post(
            "/portal/upload",
            content=_multipart(csrf, [("big.txt", b"words " * (64 * 1024))]),
            headers={
                "Content-Type": f"multipart/form-data; boundary={_BOUNDARY}",
                "Content-Length": "10",
            },
        )
        assert response.status_code == 413
        assert await site.store.repository.list("larkspur") == []


@pytest.mark.parametrize("path", ["/portal/sign-in", "/portal/upload"])
async def test_a_length_and_a_transfer_encoding_together_are_refused(
    tmp_path: Path, path: str
) -> None:
    """Whatever the server in front does with them, the two framings together are a 400."""
    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        content_type = (
            "application/x-www-form-urlencoded"
            if path.endswith("sign-in")
            else f"multipart/form-data; boundary={_BOUNDARY}"
        )
        response = await client.post(
            path,
            content=b"token=x",
            headers={
                "Content-Type": content_type,
                "Content-Length": "7",
                "Transfer-Encoding": "chunked",
            },
        )
        assert response.status_code == 400
        assert "both a length and a transfer encoding" in response.text


@pytest.mark.parametrize("path", ["/portal/sign-in", "/portal/upload"])
async def test_a_body_without_a_declared_length_is_refused(tmp_path: Path, path: str) -> None:
    """Chunked alone still does not declare a length: 411, as before."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b"token=x"

    async with open_site(tmp_path) as site, http(site) as client:
        await sign_in(client, manager_token())
        content_type = (
            "application/x-www-form-urlencoded"
            if path.endswith("sign-in")
            else f"multipart/form-data; boundary={_BOUNDARY}"
        )
        response = await client.post(path, content=chunks(), headers={"Content-Type": content_type})
        assert "content-length" not in response.request.headers
        assert response.status_code == 411
