"""Reading admin request bodies: JSON objects only, with a classified error for anything else.

Endpoints read a body only after the caller's role is checked, so a caller without the role
never gets the body parsed (nor its problems described); the parse itself is depth-bounded.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._bounded_json import InvalidJsonError, loads_bounded

__all__ = ["read_json_object"]


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object.

    Raises:
        AdminError: ``ESRA_UNSUPPORTED_MEDIA_TYPE`` for another content type,
            ``ESRA_INVALID_REQUEST`` for a body that is not a JSON object, or nests
            deeper than ``esra.starlette._bounded_json.MAX_JSON_DEPTH``.
    """
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise AdminError(
            AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE, "Send the body as application/json."
        )
    try:
        body = loads_bounded(await request.body())
    except InvalidJsonError as exc:
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, str(exc)) from None
    if not isinstance(body, dict):
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, "The body must be a JSON object.")
    return body
