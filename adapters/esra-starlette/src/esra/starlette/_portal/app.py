"""The portal as one ASGI app, for the host to mount (``Mount("/portal", app=portal_app(...))``).

Server-rendered pages, no JavaScript. Every response carries a Content-Security-Policy that
allows only the portal's own stylesheet and forms posting back to it, refuses framing, and
sends no referrer. Refusals become pages with their status; a visitor without a valid
session is sent to sign in (303); anything unexpected is a plain 500 page, never a trace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.resources import files
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from esra.core.admin import ExplainService
from esra.starlette._admin.operator import (
    DEFAULT_CROSS_TENANT_ROLES_CLAIM,
    DEFAULT_ROLES_CLAIM,
    RoleClaims,
)
from esra.starlette._auth import JwtVerifier
from esra.starlette._portal.access import Access
from esra.starlette._portal.cookies import SECURE_COOKIES_STATE
from esra.starlette._portal.document_pages import DocumentPages
from esra.starlette._portal.errors import PortalError, SignInReason, SignInRequiredError
from esra.starlette._portal.explain_pages import ExplainPages
from esra.starlette._portal.layout import link_list, page
from esra.starlette._portal.markup import render_template
from esra.starlette._portal.paths import portal_url
from esra.starlette._portal.session import SESSION_COOKIE, Sessions
from esra.starlette._portal.sign_in import SignInPages
from esra.starlette._portal.store_pages import StorePages
from esra.starlette._portal.store_settings_pages import StoreSettingsPages
from esra.starlette._portal.tenant_pages import TenantPages
from esra.starlette._portal.upload_pages import UploadPages
from esra.starlette._stores import TenantStore

__all__ = ["portal_app"]

_SECURITY_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        b"frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
_log = logging.getLogger(__name__)


def portal_app(
    *,
    stores: Mapping[str, TenantStore],
    verifier: JwtVerifier,
    roles_claim: str = DEFAULT_ROLES_CLAIM,
    cross_tenant_roles_claim: str = DEFAULT_CROSS_TENANT_ROLES_CLAIM,
    secure_cookies: bool | None = None,
    explainer: ExplainService | None = None,
) -> Starlette:
    """Build the document store portal.

    Args:
        stores: each tenant's store on this host; a tenant without one is told so.
        verifier: verifies the operators' bearer tokens (the admin API's issuers).
        roles_claim: the token claim naming the operator's administrative roles.
        cross_tenant_roles_claim: the token claim naming roles on every tenant the token's
            issuer is trusted for; their holder chooses the tenant at ``/tenant``.
        secure_cookies: force the portal cookies' ``Secure`` flag; ``None`` sets it when
            the request arrived over https (set ``True`` behind a TLS-terminating proxy
            that forwards plain http).
        explainer: explains searches at ``/explain`` for operators holding
            ``ESRA_EXPOSURE_MANAGE``; without one that page is not served.
    """
    role_claims = RoleClaims(roles_claim, cross_tenant_roles_claim)
    sessions = Sessions(verifier, role_claims=role_claims)
    access = Access(stores, sessions)
    stylesheet = files("esra.starlette._portal").joinpath("static", "portal.css").read_bytes()

    async def css(_request: Request) -> Response:
        return Response(
            stylesheet, media_type="text/css", headers={"Cache-Control": "max-age=3600"}
        )

    routes: list[BaseRoute] = [
        Route("/static/portal.css", css, methods=["GET"]),
        *SignInPages(access, roles_claim=roles_claim).routes(),
        *StorePages(access).routes(),
        *StoreSettingsPages(access).routes(),
        *DocumentPages(access).routes(),
        *UploadPages(access).routes(),
        *TenantPages(access).routes(),
        *(ExplainPages(access, explainer).routes() if explainer is not None else ()),
    ]

    async def sign_in_first(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, SignInRequiredError)
        query: dict[str, str] = {}
        if request.method == "GET":
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            query["next"] = target
        if exc.reason is not SignInReason.ANONYMOUS:
            query["ended"] = exc.reason.value
        suffix = f"?{urlencode(query)}" if query else ""
        response = RedirectResponse(portal_url(request, "/sign-in" + suffix), status_code=303)
        if SESSION_COOKIE in request.cookies:
            sessions.end(request, response)
        return response

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PortalError)
        return _error_page(request, sessions, exc)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        title = "Page not found" if exc.status_code == 404 else "Request refused"
        message = (
            "There is no such portal page."
            if exc.status_code == 404
            else f"The portal cannot answer this request ({exc.status_code})."
        )
        error = PortalError(exc.status_code, title, message, links=(("/", "Portal home"),))
        return _error_page(request, sessions, error)

    async def unexpected(request: Request, exc: Exception) -> Response:
        # %r: the decoded path is the caller's, and a control character in it (an ANSI
        # escape, a carriage return) would rewrite the log line a terminal shows.
        _log.error("portal request failed: %s %r", request.method, request.url.path)
        error = PortalError(
            500,
            "Something went wrong",
            "The portal could not complete this request. The host's log has the details.",
            links=(("/", "Portal home"),),
        )
        response = _error_page(request, None, error)
        # Starlette answers a bare Exception in its outermost error middleware, outside
        # _SecurityHeaders: this page is the one response the middleware never sees.
        response.headers.update(
            {name.decode(): value.decode() for name, value in _SECURITY_HEADERS}
        )
        return response

    portal = Starlette(
        routes=routes,
        middleware=[Middleware(_SecurityHeaders)],
        exception_handlers={
            SignInRequiredError: sign_in_first,
            PortalError: refused,
            HTTPException: http_error,
            Exception: unexpected,
        },
    )
    # Every cookie the portal sets follows it, the session's and the notices' alike.
    setattr(portal.state, SECURE_COOKIES_STATE, secure_cookies)
    return portal


def _error_page(request: Request, sessions: Sessions | None, error: PortalError) -> Response:
    visitor = sessions.visitor_or_none(request) if sessions is not None else None
    content = render_template(
        "error.html", message=error.message, links=link_list(request, error.links)
    )
    return page(
        request, title=error.title, content=content, visitor=visitor, status_code=error.status
    )


class _SecurityHeaders:
    """Adds the portal's security headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_SECURITY_HEADERS]}
            await send(message)

        await self._app(scope, receive, with_headers)
