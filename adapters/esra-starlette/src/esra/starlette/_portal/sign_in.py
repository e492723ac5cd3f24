"""Signing in with a pasted bearer token, and signing out.

The portal has no login of its own: an operator pastes a token from the identity provider
the host already trusts (``esra dev-token`` on a development host), and the portal verifies
it exactly as the admin API does before keeping it as the session.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from esra.starlette._auth import TokenRejectedError, TokenRejection
from esra.starlette._portal.access import Access, read_form
from esra.starlette._portal.errors import SignInReason
from esra.starlette._portal.layout import callout, page
from esra.starlette._portal.markup import Markup, render_template
from esra.starlette._portal.paths import base_path, local_next, portal_url
from esra.starlette._portal.session import MAX_SESSION_TOKEN_CHARS

__all__ = ["SignInPages"]

_ENDED = {
    SignInReason.EXPIRED: "Your token has expired. Paste a fresh token to continue.",
    SignInReason.REJECTED: "Your session's token is no longer accepted. Sign in again.",
    SignInReason.SIGNED_OUT: "You are signed out.",
}
_BEARER = "bearer "


class SignInPages:
    """``/sign-in`` (form and submit) and ``/sign-out``."""

    def __init__(self, access: Access, *, roles_claim: str) -> None:
        self._access = access
        self._roles_claim = roles_claim

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        return [
            Route("/sign-in", self.form, methods=["GET"]),
            Route("/sign-in", self.sign_in, methods=["POST"]),
            Route("/sign-out", self.sign_out, methods=["POST"]),
        ]

    async def form(self, request: Request) -> Response:
        """GET /sign-in[?next=…&ended=…]: the token form."""
        ended = request.query_params.get("ended")
        reason = SignInReason(ended) if ended in _reasons() else None
        return self._page(
            request,
            _ENDED.get(reason) if reason else None,
            next_path=request.query_params.get("next"),
            kind="ok" if reason is SignInReason.SIGNED_OUT else "warning",
        )

    async def sign_in(self, request: Request) -> Response:
        """POST /sign-in: verify the pasted token, keep it as the session, go on."""
        form = await read_form(request)
        next_path = form.get("next")
        next_text = next_path if isinstance(next_path, str) else None
        if not self._access.sessions.sign_in_nonce_matches(request, form.get("nonce")):
            return self._page(
                request,
                "The sign-in form expired or came from another site. Try again.",
                next_path=next_text,
                status_code=400,
            )
        raw = form.get("token")
        token = raw.strip() if isinstance(raw, str) else ""
        if token.lower().startswith(_BEARER):
            token = token[len(_BEARER) :].strip()
        if not token:
            return self._page(
                request, "Paste a bearer token.", next_path=next_text, status_code=400
            )
        if len(token) > MAX_SESSION_TOKEN_CHARS:
            return self._page(
                request,
                f"This token is {len(token)} characters long; a browser session can keep at "
                f"most {MAX_SESSION_TOKEN_CHARS}. Use the admin API with this token instead.",
                next_path=next_text,
                status_code=400,
            )
        try:
            caller = self._access.sessions.verify(token)
        except TokenRejectedError as rejected:
            expired = rejected.reason is TokenRejection.EXPIRED
            return self._page(
                request,
                "This token has expired; get a fresh one."
                if expired
                else "This token was not accepted: it is not signed by an issuer this host "
                "trusts, is for another audience, or is malformed.",
                next_path=next_text,
                status_code=400,
            )
        if not self._access.sessions.may_sign_in(caller):
            return self._page(
                request,
                f"This token grants no ESRA & Data role on tenant {caller.tenant_id}: its "
                f"{self._roles_claim} claim must name ESRA_DATA_READ or ESRA_DATA_MANAGE.",
                next_path=next_text,
                status_code=403,
            )
        start = "/tenant" if self._access.starts_at_chooser(caller) else "/"
        target = local_next(request, next_text) or portal_url(request, start)
        response = RedirectResponse(target, status_code=303)
        self._access.sessions.start(request, response, token)
        return response

    async def sign_out(self, request: Request) -> Response:
        """POST /sign-out: end the session (CSRF-checked, so no other site can)."""
        visitor = self._access.sessions.visitor_or_none(request)
        if visitor is not None:
            await self._access.form(request, visitor)
        response = RedirectResponse(
            portal_url(request, f"/sign-in?ended={SignInReason.SIGNED_OUT.value}"),
            status_code=303,
        )
        self._access.sessions.end(request, response)
        return response

    def _page(
        self,
        request: Request,
        message: str | None,
        *,
        next_path: str | None,
        status_code: int = 200,
        kind: str = "error",
    ) -> Response:
        sessions = self._access.sessions
        nonce = sessions.new_sign_in_nonce()
        content = render_template(
            "sign_in.html",
            base=base_path(request),
            roles_claim=self._roles_claim,
            nonce=nonce,
            next=local_next(request, next_path) or "",
            message=(
                callout(message, kind=kind, role="alert" if kind == "error" else "status")
                if message
                else Markup()
            ),
        )
        response = page(
            request, title="Sign in", content=content, visitor=None, status_code=status_code
        )
        sessions.keep_sign_in_nonce(request, response, nonce)
        return response


def _reasons() -> frozenset[str]:
    return frozenset(reason.value for reason in SignInReason)
