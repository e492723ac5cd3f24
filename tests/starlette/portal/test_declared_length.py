"""A declared length that is not ASCII digits is refused (411), never a 500.

``str.isdigit`` is true for "²" and other Unicode digits that ``int`` cannot read, and an
ASGI server hands header bytes over as Latin-1: a ``Content-Length: ²`` that reached the
portal raised ``ValueError`` on the sign-in form, which is open to anyone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.types import Message

from tests.starlette.portal._site import open_site


@pytest.mark.parametrize("declared", [b"\xb2", b"\xb9\xb2", b"+10", b"1_0"])
async def test_a_length_of_non_ascii_digits_is_refused(tmp_path: Path, declared: bytes) -> None:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/portal/sign-in",
        "raw_path": b"/portal/sign-in",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"portal.test"),
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", declared),
        ],
        "client": ("198.51.100.7", 40000),
        "server": ("portal.test", 80),
    }
    async with open_site(tmp_path) as site:
        await site.app(scope, receive, send)
    (start,) = (m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 411
