"""Request size limits for the admin API, enforced before and while a body is read.

A declared ``Content-Length`` over the limit is refused before any byte is read; a body
without one (chunked) is counted as it arrives and refused the moment it passes the limit,
so an oversized request never sits in memory or on disk. Multipart uploads get their own,
larger limit; every other body the JSON one.
"""

from __future__ import annotations

from typing import Any

import attrs
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from esra.starlette._admin.errors import AdminError, AdminErrorCode, error_response

__all__ = ["AdminLimits", "BodySizeLimit"]


@attrs.frozen
class AdminLimits:
    """Byte limits of admin request bodies and the number of files one upload may carry."""

    json_bytes: int = 1024 * 1024
    upload_bytes: int = 200 * 1024 * 1024
    files_per_upload: int = 100


_TOO_LARGE = "The request body is larger than this endpoint accepts ({limit} bytes)."


class BodySizeLimit:
    """ASGI middleware refusing bodies over the limit with ``ESRA_PAYLOAD_TOO_LARGE``."""

    def __init__(self, app: ASGIApp, limits: AdminLimits) -> None:
        self._app = app
        self._limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        multipart = headers.get("content-type", "").startswith("multipart/form-data")
        limit = self._limits.upload_bytes if multipart else self._limits.json_bytes
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            response = error_response(
                AdminErrorCode.ESRA_PAYLOAD_TOO_LARGE, _TOO_LARGE.format(limit=limit)
            )
            await response(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message: dict[str, Any] = dict(await receive())
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise AdminError(
                        AdminErrorCode.ESRA_PAYLOAD_TOO_LARGE, _TOO_LARGE.format(limit=limit)
                    )
            return message

        await self._app(scope, counted, send)
