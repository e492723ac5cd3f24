"""Reading admin request bodies: JSON objects only, with a classified error for anything else.

Endpoints read a body only after the caller's role is checked, so a caller without the role
never gets the body parsed (nor its problems described); the parse itself is depth-bounded.

An object naming one key twice is refused: RFC 8259 leaves its meaning to each parser, so a
reviewer, a proxy and this host could each read a different value of one access policy,
tenant id or secret.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._bounded_json import InvalidJsonError, loads_bounded

__all__ = ["read_json_object"]


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    body = dict(pairs)
    if len(body) != len(pairs):
        raise _DuplicateKeyError
    return body


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request's body as a JSON object.

    Raises:
        AdminError: ``ESRA_UNSUPPORTED_MEDIA_TYPE`` for another content type,
            ``ESRA_INVALID_REQUEST`` for a body that is not a JSON object, nests
            deeper than ``esra.starlette._bounded_json.MAX_JSON_DEPTH``, or names a key
            twice in one object.
    """
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise AdminError(
            AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE, "Send the body as application/json."
        )
    raw = await request.body()
    try:
        body = loads_bounded(raw)
        # Parsed again, within the depth bound now known, only to find a repeated key.
        json.loads(raw, object_pairs_hook=_unique_keys)
    except InvalidJsonError as exc:
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, str(exc)) from None
    except _DuplicateKeyError:
        raise AdminError(
            AdminErrorCode.ESRA_INVALID_REQUEST, "The body names a key twice in one object."
        ) from None
    if not isinstance(body, dict):
        raise AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, "The body must be a JSON object.")
    return body
