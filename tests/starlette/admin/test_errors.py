"""Every admin failure is a JSON body with a code: tokens, routes, sizes, types, surprises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from esra.starlette._admin import AdminLimits
from tests.starlette._tokens import idp
from tests.starlette.admin._host import ADMIN, files, open_admin_host, token

MANAGER = token("ESRA_DATA_MANAGE")


def _code(response: object) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]  # type: ignore[attr-defined]


async def test_missing_expired_and_forged_tokens_are_401_with_a_challenge(
    tmp_path: Path,
) -> None:
    """No token, an expired one and ``alg: none`` all get 401 and ``WWW-Authenticate``."""
    expired = idp().token(esra_roles=["ESRA_DATA_MANAGE"], exp=1)
    async with open_admin_host(tmp_path) as host:
        for bearer in (None, expired, "not-a-jwt", idp().hs256_with_public_key()):
            async with host.client(bearer) as client:
                response = await client.get(f"{ADMIN}/store")
            assert _code(response) == (401, "ESRA_UNAUTHENTICATED")
            assert response.headers["www-authenticate"].startswith("Bearer")


async def test_unknown_routes_and_methods_answer_json(tmp_path: Path) -> None:
    """Starlette's own 404 and 405 come back in the admin error shape."""
    async with open_admin_host(tmp_path) as host, host.client(MANAGER) as client:
        assert _code(await client.get(f"{ADMIN}/nothing-here")) == (404, "ESRA_NOT_FOUND")
        assert _code(await client.put(f"{ADMIN}/store")) == (405, "ESRA_METHOD_NOT_ALLOWED")
        bad_filter = await client.get(f"{ADMIN}/store/documents?state=archived")
        assert _code(bad_filter) == (400, "ESRA_INVALID_REQUEST")
        assert "archived" in bad_filter.json()["error"]["message"]


async def test_bodies_over_the_limit_are_refused_declared_or_streamed(tmp_path: Path) -> None:
    """A declared length over the limit, or a chunked body passing it, gets 413 JSON."""
    limits = AdminLimits(json_bytes=1024, upload_bytes=4096)
    # Secrets need SECURITY_MANAGE: without it the body is never read (403 comes first).
    both = token("ESRA_DATA_MANAGE", "SECURITY_MANAGE")
    async with open_admin_host(tmp_path, limits=limits) as host, host.client(both) as client:
        big = b'{"value": "' + b"x" * 2048 + b'"}'
        declared = await client.put(
            f"{ADMIN}/secrets/db", content=big, headers={"content-type": "application/json"}
        )
        assert _code(declared) == (413, "ESRA_PAYLOAD_TOO_LARGE")

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(8):
                yield b"x" * 512

        streamed = await client.put(
            f"{ADMIN}/secrets/db", content=chunks(), headers={"content-type": "application/json"}
        )
        assert _code(streamed) == (413, "ESRA_PAYLOAD_TOO_LARGE")
        upload = await client.post(
            f"{ADMIN}/store/documents", files=files(("big.txt", b"word " * 2000))
        )
        assert _code(upload) == (413, "ESRA_PAYLOAD_TOO_LARGE")
        listed = (await client.get(f"{ADMIN}/store/documents")).json()
        assert listed["counts"]["total"] == 0


async def test_upload_needs_multipart_and_at_least_one_file(tmp_path: Path) -> None:
    """A JSON upload is 415; a multipart body without files is 400."""
    async with open_admin_host(tmp_path) as host, host.client(MANAGER) as client:
        as_json = await client.post(f"{ADMIN}/store/documents", json={"files": []})
        assert _code(as_json) == (415, "ESRA_UNSUPPORTED_MEDIA_TYPE")
        empty = await client.post(f"{ADMIN}/store/documents", data={"scope": "hr"}, files={})
        assert _code(empty) == (415, "ESRA_UNSUPPORTED_MEDIA_TYPE")
        no_files = await client.post(
            f"{ADMIN}/store/documents",
            files=[("other", ("a.txt", b"text", "text/plain"))],
        )
        assert _code(no_files) == (400, "ESRA_INVALID_REQUEST")
        bad_scope = await client.post(
            f"{ADMIN}/store/documents", files=files(("a.txt", b"text")), data={"scope": "a\x00b"}
        )
        assert _code(bad_scope) == (400, "ESRA_INVALID_REQUEST")


async def test_an_unexpected_failure_is_500_without_its_details(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception inside a service is logged, and the body names only ESRA_INTERNAL."""
    async with open_admin_host(tmp_path) as host, host.client(MANAGER) as client:

        async def broken(*_args: object, **_kwargs: object) -> None:
            msg = "postgresql://admin:hunter2@db.internal/store exploded"
            raise RuntimeError(msg)

        monkeypatch.setattr(host.store.documents, "search", broken)
        response = await client.get(f"{ADMIN}/store/documents")
        assert _code(response) == (500, "ESRA_INTERNAL")
        assert "hunter2" not in response.text
        assert "Traceback" not in response.text


async def test_the_failure_log_line_cannot_be_forged_through_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The path is logged escaped: a percent-encoded ANSI escape in it (decoded by the
    ASGI server; a line feed never reaches a mounted app) would otherwise let the rest of
    the path erase the line shown in a terminal and put a forged entry in its place."""
    async with open_admin_host(tmp_path) as host, host.client(MANAGER) as client:

        async def broken(*_args: object, **_kwargs: object) -> None:
            raise RuntimeError

        monkeypatch.setattr(host.store.documents, "document", broken)
        response = await client.get(f"{ADMIN}/store/documents/x%1B[2K2026-12-07 CRITICAL forged")
        assert _code(response) == (500, "ESRA_INTERNAL")
    [line] = [r.getMessage() for r in caplog.records if "admin request" in r.getMessage()]
    assert line.isprintable()
    assert "x\\x1b[2K2026-12-07 CRITICAL forged" in line
