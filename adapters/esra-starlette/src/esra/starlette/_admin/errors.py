"""The admin API's errors: a closed set of codes, each with its HTTP status, as JSON bodies.

Every failure — a refused token, a missing role, a bad body, an unknown route, an
unexpected exception — answers ``{"error": {"code": ..., "message": ...}}``. Messages are
fixed text or the core's own operator-safe words; a stack trace or driver text never
reaches the body (unexpected exceptions are logged and answered ``ESRA_INTERNAL``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import StrEnum

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["AdminError", "AdminErrorCode", "error_response", "handle_http", "handle_unexpected"]

_log = logging.getLogger(__name__)


class AdminErrorCode(StrEnum):
    """Why an admin request failed; each code has exactly one HTTP status."""

    ESRA_UNAUTHENTICATED = "ESRA_UNAUTHENTICATED"
    ESRA_FORBIDDEN = "ESRA_FORBIDDEN"
    ESRA_NOT_FOUND = "ESRA_NOT_FOUND"
    ESRA_METHOD_NOT_ALLOWED = "ESRA_METHOD_NOT_ALLOWED"
    ESRA_INVALID_REQUEST = "ESRA_INVALID_REQUEST"
    ESRA_CONFIGURATION_INVALID = "ESRA_CONFIGURATION_INVALID"
    ESRA_CONFLICT = "ESRA_CONFLICT"
    ESRA_DOCUMENT_READ_ONLY = "ESRA_DOCUMENT_READ_ONLY"
    ESRA_STORE_NOT_READY = "ESRA_STORE_NOT_READY"
    ESRA_PAYLOAD_TOO_LARGE = "ESRA_PAYLOAD_TOO_LARGE"
    ESRA_UNSUPPORTED_MEDIA_TYPE = "ESRA_UNSUPPORTED_MEDIA_TYPE"
    ESRA_INTERNAL = "ESRA_INTERNAL"


STATUS: dict[AdminErrorCode, int] = {
    AdminErrorCode.ESRA_UNAUTHENTICATED: 401,
    AdminErrorCode.ESRA_FORBIDDEN: 403,
    AdminErrorCode.ESRA_NOT_FOUND: 404,
    AdminErrorCode.ESRA_METHOD_NOT_ALLOWED: 405,
    AdminErrorCode.ESRA_INVALID_REQUEST: 400,
    AdminErrorCode.ESRA_CONFIGURATION_INVALID: 422,
    AdminErrorCode.ESRA_CONFLICT: 409,
    AdminErrorCode.ESRA_DOCUMENT_READ_ONLY: 409,
    AdminErrorCode.ESRA_STORE_NOT_READY: 409,
    AdminErrorCode.ESRA_PAYLOAD_TOO_LARGE: 413,
    AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE: 415,
    AdminErrorCode.ESRA_INTERNAL: 500,
}

_HTTP_CODES = {
    401: AdminErrorCode.ESRA_UNAUTHENTICATED,
    403: AdminErrorCode.ESRA_FORBIDDEN,
    404: AdminErrorCode.ESRA_NOT_FOUND,
    405: AdminErrorCode.ESRA_METHOD_NOT_ALLOWED,
    413: AdminErrorCode.ESRA_PAYLOAD_TOO_LARGE,
    415: AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE,
}


class AdminError(Exception):
    """An admin request failed with ``code``; ``message`` is safe to show the operator."""

    def __init__(self, code: AdminErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(
    code: AdminErrorCode, message: str, *, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The JSON body and status of ``code``."""
    return JSONResponse(
        {"error": {"code": code.value, "message": message}},
        status_code=STATUS[code],
        headers=headers,
    )


async def handle_http(_request: Request, exc: Exception) -> Response:
    """Starlette's own HTTP errors (unknown route, wrong method) as admin JSON errors."""
    if isinstance(exc, AdminError):
        challenge = (
            {"WWW-Authenticate": 'Bearer realm="esra-admin"'}
            if exc.code is AdminErrorCode.ESRA_UNAUTHENTICATED
            else None
        )
        return error_response(exc.code, exc.message, headers=challenge)
    if isinstance(exc, HTTPException):
        code = _HTTP_CODES.get(exc.status_code, AdminErrorCode.ESRA_INVALID_REQUEST)
        return error_response(code, _MESSAGES[code], headers=exc.headers)
    return await handle_unexpected(_request, exc)


async def handle_unexpected(request: Request, exc: Exception) -> Response:
    """Anything unforeseen: logged with its traceback, answered without it."""
    # %r: the decoded path is the caller's (see the portal's handler).
    _log.error("admin request %s %r failed", request.method, request.url.path, exc_info=exc)
    return error_response(AdminErrorCode.ESRA_INTERNAL, _MESSAGES[AdminErrorCode.ESRA_INTERNAL])


_MESSAGES = {
    AdminErrorCode.ESRA_UNAUTHENTICATED: "A valid bearer token is required.",
    AdminErrorCode.ESRA_FORBIDDEN: "Your roles do not permit this action.",
    AdminErrorCode.ESRA_NOT_FOUND: "No such resource.",
    AdminErrorCode.ESRA_METHOD_NOT_ALLOWED: "This method is not allowed on this resource.",
    AdminErrorCode.ESRA_PAYLOAD_TOO_LARGE: "The request body is too large.",
    AdminErrorCode.ESRA_UNSUPPORTED_MEDIA_TYPE: "This content type is not accepted here.",
    AdminErrorCode.ESRA_INVALID_REQUEST: "The request is not valid.",
    AdminErrorCode.ESRA_INTERNAL: "The request could not be completed.",
}
