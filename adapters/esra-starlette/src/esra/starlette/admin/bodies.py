"""Reading admin request bodies: JSON objects only, with a classified error for anything else."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from esra.starlette.admin.errors import AdminError, AdminErrorCode

__all__ = ["read_json_object"]


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object.

    Raises:
        AdminError: ``ESRA_UNSUPPORTED_MEDIA_TYPE`` for another content type,
            ``ESRA_INVALID_REQUEST`` for a body that is not a JSON object.
    """
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise AdminError(
            AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE, "Send the body as application/json."
        )
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AdminError(
            AdminErrorCode.ESRA_INVALID_REQUEST,
            f"The body is not valid JSON (line {getattr(exc, 'lineno', 1)}).",
        ) from None
    if not isinstance(body, dict):
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, "The body must be a JSON object.")
    return body
