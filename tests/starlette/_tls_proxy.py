"""An app as a TLS-terminating proxy serves it: the browser speaks https, the app sees http."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["behind_tls_proxy"]


def behind_tls_proxy(app: ASGIApp) -> ASGIApp:
    """``app``, its requests rewritten to the plain http a terminating proxy forwards."""

    async def proxied(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, "scheme": "http"} if scope["type"] == "http" else scope, receive, send)

    return proxied
