"""Request bodies the portal reads: framed one way, declared, and bounded as they arrive.

A declared ``Content-Length`` alone bounds nothing: a server may frame the body otherwise.
uvicorn's h11 parser frames a request that also carries ``Transfer-Encoding: chunked`` as
chunked, whatever length it declares, and the sign-in form is open to anyone. So a request
carrying both is refused before any byte is read (400), one without a declared length too
(411), one declaring more than the limit as well (413) — and whatever passes is counted as
it arrives and refused (413) the moment it goes past the limit, before the parser has it.

The admin API's ``BodySizeLimit`` middleware counts the same way but answers in the admin
API's JSON and admits undeclared lengths; the portal answers with pages and checks a body
only in the handlers that read one, after the session and role checks.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.types import Message, Receive

from esra.starlette._portal.errors import PortalError

__all__ = ["bounded_body"]


def bounded_body(
    request: Request, *, limit: int, noun: str, too_large: Callable[[], PortalError]
) -> Request:
    """``request`` over a receive channel that refuses its body past ``limit`` bytes.

    Read the form from the returned request, not from ``request``.

    Args:
        request: the request whose body is about to be read (none of it read yet).
        limit: the most bytes the body may carry, as declared and as received.
        noun: what the body is (``"form"``, ``"upload"``), for the refusal's page.
        too_large: the refusal of a body over ``limit``.

    Raises:
        PortalError: 400 when the request carries both a ``Content-Length`` and a
            ``Transfer-Encoding``, 411 without a declared length, ``too_large()`` when the
            declared length is over ``limit`` (here) or the received bytes pass it (while
            the returned request's body is read).
    """
    headers = request.headers
    declared = headers.get("content-length")
    if declared is not None and "transfer-encoding" in headers:
        raise PortalError(
            400,
            f"{noun.capitalize()} refused",
            f"The {noun} declared both a length and a transfer encoding; a browser sends "
            "only the length.",
        )
    if declared is None or not declared.isdigit():
        raise PortalError(
            411, f"{noun.capitalize()} refused", f"The {noun} did not declare its length."
        )
    if int(declared) > limit:
        raise too_large()
    return Request(request.scope, _counting(request.receive, limit, too_large))


def _counting(receive: Receive, limit: int, too_large: Callable[[], PortalError]) -> Receive:
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large()
        return message

    return counted
