"""Hostile requests against every admin operation: always a JSON answer with a known code.

Seeded random requests — every documented operation, with made-up and real ids, wrong
methods, hostile path segments, garbage and oversized bodies, wrong content types, and
tokens of every role or none — must never produce a 5xx, a non-JSON error or an unknown
code, and must never change another tenant's store.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from esra.core.codes import AuditEvent
from esra.starlette._admin import ADMIN_PATH, AdminErrorCode, AdminLimits
from esra.starlette._admin.openapi import OPERATIONS
from tests.starlette._world import TENANT_A, TENANT_B
from tests.starlette.admin._host import ADMIN, files, open_admin_host, token

_IDS = [
    "no-such-id",
    "../../etc/passwd",
    "%2e%2e%2fadmin",
    "' OR 1=1 --",
    "%E2%80%AE%00x",  # bidi override and NUL, percent-encoded as a client must send them
    "a" * 300,
]
_BODIES: list[tuple[bytes, str]] = [
    (b"", "application/json"),
    (b"{", "application/json"),
    (b"[]", "application/json"),
    (b'{"value": null}', "application/json"),
    (b'{"id": {"$ne": 1}, "name": 5}', "application/json"),
    (json.dumps({"source": {"id": "x" * 5000}}).encode(), "application/json"),
    (b"\xff\xfe\x00garbage", "application/json"),
    (b"value=1", "application/x-www-form-urlencoded"),
    (b"--b\r\nContent-Disposition: form-data; name=files\r\n\r\nxx", "multipart/form-data"),
    (b"<xml/>", "text/xml"),
]
_ROLES = [
    (),
    ("ESRA_DATA_READ",),
    ("ESRA_DATA_MANAGE",),
    ("GOVERNANCE_MANAGE",),
    ("ESRA_EXPOSURE_MANAGE",),
    ("SECURITY_MANAGE",),
    ("ESRA_DATA_MANAGE", "SECURITY_MANAGE", "GOVERNANCE_MANAGE", "ESRA_EXPOSURE_MANAGE"),
]
_CODES = {code.value for code in AdminErrorCode}


async def test_no_request_gets_a_server_error_or_a_non_json_error(tmp_path: Path) -> None:
    """400 seeded requests; every error is ``{"error": {"code", "message"}}`` below 500."""
    rng = random.Random(20261130)
    limits = AdminLimits(json_bytes=4096, upload_bytes=64 * 1024)
    async with open_admin_host(tmp_path, limits=limits) as host:
        async with host.client(token("ESRA_DATA_MANAGE")) as manager:
            seeded = await manager.post(
                f"{ADMIN}/store/documents", files=files(("keep.txt", b"keep me\n"))
            )
            real_id = seeded.json()["files"][0]["documentId"]
        tokens = [None, "garbage", *(token(*roles) for roles in _ROLES)]
        tokens.append(token("ESRA_DATA_MANAGE", "SECURITY_MANAGE", tenant=TENANT_B))
        for _ in range(400):
            operation = rng.choice(OPERATIONS)
            identifier = rng.choice([real_id, *_IDS])
            path = operation.path
            for name in ("document_id", "source_id", "capability_id", "slug", "reference"):
                path = path.replace("{" + name + "}", identifier)
            method = (
                operation.method if rng.random() < 0.85 else rng.choice(["get", "put", "patch"])
            )
            body, content_type = rng.choice(_BODIES)
            async with host.client(rng.choice(tokens)) as client:
                response = await client.request(
                    method.upper(),
                    f"{ADMIN_PATH}{path}",
                    content=body if method != "get" else None,
                    headers={"content-type": content_type} if method != "get" else {},
                )
            assert response.status_code < 500, (method, path, response.text)
            if response.status_code >= 400:
                assert response.headers.get("content-type") == "application/json", (
                    method,
                    path,
                    response.status_code,
                    response.text[:200],
                )
                error = response.json()["error"]
                assert error["code"] in _CODES, error
                assert isinstance(error["message"], str)
                assert "Traceback" not in response.text
        await host.store.lifecycle.wait()  # a fuzzed manager may have re-initialised it
        async with host.client(token("ESRA_DATA_READ")) as reader:
            survivor = await reader.get(f"{ADMIN}/store/documents/{real_id}")
        # Only an audited delete by one of tenant A's own managers may have removed it.
        deleted = [r for r in host.audit.events(AuditEvent.DOCUMENT_DELETE) if r.outcome == "ok"]
        assert survivor.status_code == (404 if deleted else 200)
        assert all(r.tenant_id == TENANT_A for r in deleted)
