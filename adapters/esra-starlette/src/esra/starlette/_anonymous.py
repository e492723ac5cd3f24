"""``esra serve --insecure-dev-anonymous``: a fixed development caller for unauthenticated calls.

The official MCP conformance suite (``@modelcontextprotocol/conformance``) cannot send an
``Authorization`` header, and ``/mcp`` answers every request without a bearer token ``401``.
For that suite only, ``DevAnonymousCaller`` adds a fresh token from the embedded default's
development issuer — subject ``dev-anonymous``, client application ``demo-client``, no other
claims — to any request that carries no ``Authorization`` header. The token then goes through
the ordinary verifier, so nothing else about authentication changes, and a request that
brings its own (even a bad) token is left alone.

``esra serve`` accepts the option only for the embedded default (never with ``--config``)
bound to a loopback address: the caller it grants sees the demo's fictional data only.
"""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.types import ASGIApp, Receive, Scope, Send

from esra.starlette._devtoken import DevIssuer

__all__ = ["ANONYMOUS_SUBJECT", "LOOPBACK_HOSTS", "DevAnonymousCaller"]

ANONYMOUS_SUBJECT = "dev-anonymous"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_TOKEN_LIFETIME_S = 60


class DevAnonymousCaller:
    """ASGI middleware: a request without ``Authorization`` is made as ``dev-anonymous``."""

    def __init__(self, app: ASGIApp, issuer: DevIssuer, *, tenant: str, client_app: str) -> None:
        self._app = app
        self._issuer = issuer
        self._tenant = tenant
        self._client_app = client_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not any(
            name.lower() == b"authorization" for name, _ in scope["headers"]
        ):
            token = self._issuer.mint(
                tenant=self._tenant,
                subject=ANONYMOUS_SUBJECT,
                client_app=self._client_app,
                now=datetime.now(UTC),
                lifetime_s=_TOKEN_LIFETIME_S,
            )
            header = (b"authorization", f"Bearer {token}".encode("ascii"))
            scope = {**scope, "headers": [*scope["headers"], header]}
        await self._app(scope, receive, send)
