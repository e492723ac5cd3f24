"""Request bodies the portal reads: framed one way, declared, bounded as they arrive, UTF-8.

A declared ``Content-Length`` alone bounds nothing: a server may frame the body otherwise.
uvicorn's h11 parser frames a request that also carries ``Transfer-Encoding: chunked`` as
chunked, whatever length it declares, and the sign-in form is open to anyone. So a request
carrying both is refused before any byte is read (400), one without a declared length too
(411), one declaring more than the limit as well (413) — and whatever passes is counted as
it arrives and refused (413) the moment it goes past the limit, before the parser has it.

Starlette decodes a multipart body's fields with whatever codec its ``Content-Type`` names;
UTF-7 or ``unicode_escape`` turn plain ASCII bytes into lone surrogates that no later step can
encode (the CSRF comparison, the token verifier). Browsers never declare a charset on a
form, so a multipart body naming one other than UTF-8 is refused (415) before it is read.

The admin API's ``BodySizeLimit`` middleware counts the same way but answers in the admin
API's JSON and admits undeclared lengths; the portal answers with pages and checks a body
only in the handlers that read one, after the session and role checks.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from python_multipart.multipart import parse_options_header
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
            ``Transfer-Encoding``, 411 without a declared length, 415 for a multipart body
            declaring a charset other than UTF-8, ``too_large()`` when the declared length
            is over ``limit`` (here) or the received bytes pass it (while the returned
            request's body is read).
    """
    headers = request.headers
    if not _utf8(headers.get("content-type", "")):
        raise PortalError(
            415,
            f"{noun.capitalize()} refused",
            f"The {noun} declared a character set other than UTF-8; a browser declares none.",
        )
    declared = headers.get("content-length")
    if declared is not None and "transfer-encoding" in headers:
        raise PortalError(
            400,
            f"{noun.capitalize()} refused",
            f"The {noun} declared both a length and a transfer encoding; a browser sends "
            "only the length.",
        )
    # ASCII digits only: str.isdigit() also holds for "²", which int() cannot read.
    if declared is None or not (declared.isascii() and declared.isdigit()):
        raise PortalError(
            411, f"{noun.capitalize()} refused", f"The {noun} did not declare its length."
        )
    if int(declared) > limit:
        raise too_large()
    return Request(request.scope, _counting(request.receive, limit, too_large))


def _utf8(content_type: str) -> bool:
    """Whether Starlette decodes the fields of a body of ``content_type`` as UTF-8.

    Read with the parser Starlette's multipart reader uses, so both see the same charset.
    A URL-encoded body is always decoded as UTF-8, whatever it declares.
    """
    media_type, params = parse_options_header(content_type)
    charset = params.get(b"charset")
    if media_type != b"multipart/form-data" or charset is None:
        return True
    try:
        return codecs.lookup(charset.decode("latin-1")).name == "utf-8"
    except LookupError:
        return False


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
