"""The portal session: the operator's bearer token in a cookie, verified on every request.

Signing in stores the pasted token in an HttpOnly, ``SameSite=Strict`` cookie scoped to the
portal's path (``Secure`` over https). Nothing else about the session is kept: each request
verifies the token again with the host's :class:`~esra.starlette.auth.JwtVerifier`, so an
expired, revoked-issuer or tampered token ends the session at once, and roles come from the
token exactly as they do for the admin API.

Every state-changing form carries a CSRF token derived from the session token (an HMAC keyed
with it): only a page rendered for this session can hold it, it needs no server-side state
(any host process checks it), and it is compared in constant time. The sign-in form itself
is protected by a double-submitted random nonce, so another site cannot sign a visitor in
under a token of its choosing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import Response

from esra.core.admin.roles import Role
from esra.core.docstore.management import Operator
from esra.starlette.admin.operator import roles_of
from esra.starlette.auth import AuthenticatedCaller, JwtVerifier, TokenRejectedError, TokenRejection
from esra.starlette.portal.errors import PortalError, SignInReason, SignInRequiredError
from esra.starlette.portal.paths import base_path

__all__ = [
    "MAX_SESSION_TOKEN_CHARS",
    "SESSION_COOKIE",
    "SIGN_IN_COOKIE",
    "Sessions",
    "Visitor",
]

SESSION_COOKIE = "esra_portal_session"
SIGN_IN_COOKIE = "esra_portal_sign_in"
# Browsers keep a cookie of about 4096 bytes, name and attributes included.
MAX_SESSION_TOKEN_CHARS = 3800
_CSRF_PURPOSE = b"esra.portal.csrf"

_log = logging.getLogger(__name__)


@attrs.frozen
class Visitor:
    """A signed-in operator: the verified caller, their store operator and CSRF token."""

    caller: AuthenticatedCaller
    operator: Operator
    csrf: str

    def may(self, role: Role) -> bool:
        """Whether the token grants ``role`` (or a role implying it) on its tenant."""
        return self.operator.may(role)


class Sessions:
    """Starts, reads and ends portal sessions.

    Args:
        verifier: the host's verifier; the same issuers as the admin API and MCP endpoint.
        roles_claim: the token claim naming the operator's administrative roles.
        secure_cookies: force the cookie's ``Secure`` flag on or off; ``None`` sets it when
            the request arrived over https.
    """

    def __init__(
        self, verifier: JwtVerifier, *, roles_claim: str, secure_cookies: bool | None
    ) -> None:
        self._verifier = verifier
        self._roles_claim = roles_claim
        self._secure = secure_cookies

    def visitor(self, request: Request) -> Visitor:
        """The signed-in visitor of ``request``.

        Raises:
            SignInRequiredError: no session cookie, or its token no longer verifies.
        """
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            raise SignInRequiredError(SignInReason.ANONYMOUS)
        try:
            caller = self.verify(token)
        except TokenRejectedError as rejected:
            expired = rejected.reason is TokenRejection.EXPIRED
            raise SignInRequiredError(
                SignInReason.EXPIRED if expired else SignInReason.REJECTED
            ) from None
        return self._visitor(caller, token)

    def visitor_or_none(self, request: Request) -> Visitor | None:
        """The signed-in visitor, or ``None`` (for pages that render either way)."""
        try:
            return self.visitor(request)
        except SignInRequiredError:
            return None

    def verify(self, token: str) -> AuthenticatedCaller:
        """Verify ``token`` as the admin API would.

        Raises:
            TokenRejectedError: the token is refused (logged by reason, never by content).
        """
        try:
            return self._verifier.authenticate(token)
        except TokenRejectedError as rejected:
            _log.info("portal session token refused: %s", rejected.reason.value)
            raise
        except Exception:
            # Fail closed, as the MCP endpoint does: a verification bug refuses the token.
            _log.exception("portal session token verification failed unexpectedly")
            raise TokenRejectedError(TokenRejection.MALFORMED) from None

    def start(self, request: Request, response: Response, token: str) -> None:
        """Keep ``token`` as the session of the browser that receives ``response``."""
        response.set_cookie(
            SESSION_COOKIE,
            token,
            **self._cookie_attributes(request),
        )
        self.forget_sign_in_nonce(request, response)

    def end(self, request: Request, response: Response) -> None:
        """Remove the session cookie."""
        response.delete_cookie(
            SESSION_COOKIE,
            **self._cookie_attributes(request),
        )

    def require_csrf(self, visitor: Visitor, submitted: object) -> None:
        """Refuse a form whose CSRF token is not this session's.

        Raises:
            PortalError: 403, the form did not come from a page of this session.
        """
        if not isinstance(submitted, str) or not hmac.compare_digest(
            submitted.encode(), visitor.csrf.encode()
        ):
            raise PortalError(
                403,
                "Form expired",
                "This form did not come from your current portal session (it may be out of "
                "date, or from another site). Go back, reload the page and try again.",
                links=(("/documents", "Documents"),),
            )

    @staticmethod
    def new_sign_in_nonce() -> str:
        """A fresh random nonce for one sign-in form."""
        return secrets.token_urlsafe(32)

    def keep_sign_in_nonce(self, request: Request, response: Response, nonce: str) -> None:
        """Set ``nonce`` as a cookie too, to compare with the form's copy on submit."""
        response.set_cookie(
            SIGN_IN_COOKIE,
            nonce,
            **self._cookie_attributes(request),
        )

    @staticmethod
    def sign_in_nonce_matches(request: Request, submitted: object) -> bool:
        """Whether the submitted sign-in nonce is the one this browser was given."""
        expected = request.cookies.get(SIGN_IN_COOKIE)
        return (
            isinstance(submitted, str)
            and bool(expected)
            and hmac.compare_digest(submitted.encode(), str(expected).encode())
        )

    def forget_sign_in_nonce(self, request: Request, response: Response) -> None:
        """Remove the sign-in nonce cookie once it has served."""
        response.delete_cookie(
            SIGN_IN_COOKIE,
            **self._cookie_attributes(request),
        )

    def operator(self, caller: AuthenticatedCaller) -> Operator:
        """The store operator ``caller`` acts as: their roles, on their own tenant only."""
        return Operator(
            subject=caller.subject,
            tenant_id=caller.tenant_id,
            roles=roles_of(caller, self._roles_claim),
        )

    def _visitor(self, caller: AuthenticatedCaller, token: str) -> Visitor:
        csrf = hmac.new(token.encode(), _CSRF_PURPOSE, hashlib.sha256).hexdigest()
        return Visitor(caller=caller, operator=self.operator(caller), csrf=csrf)

    def _is_secure(self, request: Request) -> bool:
        if self._secure is not None:
            return self._secure
        return request.url.scheme == "https"

    def _cookie_attributes(self, request: Request) -> dict[str, Any]:
        """Every portal cookie's attributes: the portal's path, HttpOnly, SameSite=Strict,
        Secure over https (or as configured)."""
        return {
            "path": self._cookie_path(request),
            "secure": self._is_secure(request),
            "httponly": True,
            "samesite": "strict",
        }

    @staticmethod
    def _cookie_path(request: Request) -> str:
        return base_path(request) or "/"
