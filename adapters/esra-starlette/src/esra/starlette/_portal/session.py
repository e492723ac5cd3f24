"""The portal session: the operator's bearer token in a cookie, verified on every request.

Signing in stores the pasted token in an HttpOnly, ``SameSite=Strict`` cookie scoped to the
portal's path (``Secure`` over https). Nothing else about the session is kept: each request
verifies the token again with the host's :class:`~esra.starlette.JwtVerifier`, so an
expired, revoked-issuer or tampered token ends the session at once, and roles come from the
token exactly as they do for the admin API.

An operator holding cross-tenant roles may choose the tenant it acts on. The choice is a
second cookie sealed with an HMAC keyed by the session token, so it belongs to this session
only (a new token drops it), and it is re-checked against the token's grants on every
request: a tenant the token grants nothing on is never acted on, whatever the cookie says.

Every state-changing form carries a CSRF token derived from the session token (an HMAC keyed
with it): only a page rendered for this session can hold it, it needs no server-side state
(any host process checks it), and it is compared in constant time. The sign-in form itself
is protected by a double-submitted random nonce, so another site cannot sign a visitor in
under a token of its choosing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
from typing import Any

import attrs
from starlette.requests import Request
from starlette.responses import Response

from esra.core.admin import Administrator, Role, implied_roles
from esra.core.docstore import Operator
from esra.starlette._admin.operator import MAX_TENANT_CHARS, RoleClaims, grants_of
from esra.starlette._auth import (
    AuthenticatedCaller,
    JwtVerifier,
    TokenRejectedError,
    TokenRejection,
)
from esra.starlette._portal.cookies import cookies_are_secure
from esra.starlette._portal.errors import PortalError, SignInReason, SignInRequiredError
from esra.starlette._portal.paths import base_path

__all__ = [
    "MAX_SESSION_TOKEN_CHARS",
    "SESSION_COOKIE",
    "SIGN_IN_COOKIE",
    "TENANT_COOKIE",
    "Sessions",
    "Visitor",
]

SESSION_COOKIE = "esra_portal_session"
SIGN_IN_COOKIE = "esra_portal_sign_in"
TENANT_COOKIE = "esra_portal_tenant"
# Browsers keep a cookie of about 4096 bytes, name and attributes included.
MAX_SESSION_TOKEN_CHARS = 3800
_CSRF_PURPOSE = b"esra.portal.csrf"
_TENANT_PURPOSE = b"esra.portal.tenant\x00"

_log = logging.getLogger(__name__)


@attrs.frozen
class Visitor:
    """A signed-in operator: the verified caller, their store operator (on the tenant they
    act on), every grant their token carries, and the session's CSRF token."""

    caller: AuthenticatedCaller
    operator: Operator
    csrf: str
    administrator: Administrator

    def may(self, role: Role) -> bool:
        """Whether the token grants ``role`` (or a role implying it) on the acting tenant."""
        return self.operator.may(role)

    @property
    def may_choose_tenant(self) -> bool:
        """Whether any grant reaches beyond the token's own tenant (a cross-tenant role)."""
        home = self.caller.tenant_id
        return any(grant.tenant_id != home for grant in self.administrator.grants)


class Sessions:
    """Starts, reads and ends portal sessions.

    Args:
        verifier: the host's verifier; the same issuers as the admin API and MCP endpoint.
        role_claims: the token claims naming the operator's administrative roles (on its own
            tenant, and on every tenant its issuer is trusted for).

    Its cookies are ``Secure`` as ``cookies_are_secure`` says, like every portal cookie.
    """

    def __init__(self, verifier: JwtVerifier, *, role_claims: RoleClaims) -> None:
        self._verifier = verifier
        self._role_claims = role_claims

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
        return self._visitor(caller, token, self._chosen_tenant(request, token))

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
        """Remove the session cookie (and the session's tenant choice)."""
        response.delete_cookie(
            SESSION_COOKIE,
            **self._cookie_attributes(request),
        )
        response.delete_cookie(TENANT_COOKIE, **self._cookie_attributes(request))

    def choose_tenant(
        self, request: Request, response: Response, visitor: Visitor, tenant_id: str
    ) -> None:
        """Keep ``tenant_id`` as ``visitor``'s acting tenant (the caller checked the grant).

        Choosing the token's own tenant forgets the choice instead.
        """
        token = request.cookies.get(SESSION_COOKIE, "")
        if tenant_id == visitor.caller.tenant_id:
            response.delete_cookie(TENANT_COOKIE, **self._cookie_attributes(request))
            return
        encoded = base64.urlsafe_b64encode(tenant_id.encode()).decode().rstrip("=")
        value = f"{encoded}.{_tenant_seal(token, tenant_id)}"
        response.set_cookie(TENANT_COOKIE, value, **self._cookie_attributes(request))

    def may_sign_in(self, caller: AuthenticatedCaller) -> bool:
        """Whether ``caller``'s token grants ``ESRA_DATA_READ`` (or more) on any tenant."""
        return any(
            Role.ESRA_DATA_READ in implied_roles(grant.role)
            for grant in self.administrator(caller).grants
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

    def administrator(self, caller: AuthenticatedCaller) -> Administrator:
        """Every grant ``caller``'s token carries, as the admin API reads them."""
        return Administrator(
            caller.subject, grants_of(caller, self._role_claims), home_tenant_id=caller.tenant_id
        )

    def operator(self, caller: AuthenticatedCaller, tenant_id: str | None = None) -> Operator:
        """The store operator ``caller`` acts as on ``tenant_id`` (default: their own)."""
        acting = caller.tenant_id if tenant_id is None else tenant_id
        return Operator.acting_for(self.administrator(caller), acting)

    def _visitor(
        self, caller: AuthenticatedCaller, token: str, chosen: str | None = None
    ) -> Visitor:
        csrf = hmac.new(token.encode(), _CSRF_PURPOSE, hashlib.sha256).hexdigest()
        administrator = self.administrator(caller)
        # A choice the token no longer grants anything on falls back to the own tenant.
        acting = chosen if chosen is not None and administrator.roles_on(chosen) else None
        return Visitor(
            caller=caller,
            operator=self.operator(caller, acting),
            csrf=csrf,
            administrator=administrator,
        )

    @staticmethod
    def _chosen_tenant(request: Request, token: str) -> str | None:
        """The tenant this session chose, if its cookie is sealed by this session's token."""
        raw = request.cookies.get(TENANT_COOKIE)
        if not raw or raw.count(".") != 1:
            return None
        encoded, seal = raw.split(".")
        # Base64 of at most MAX_TENANT_CHARS characters of UTF-8 (4 bytes each): never more.
        if len(encoded) > 6 * MAX_TENANT_CHARS:
            return None
        try:
            tenant_id = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except ValueError:  # not base64, or not UTF-8 (binascii.Error is a ValueError)
            return None
        if not hmac.compare_digest(seal.encode(), _tenant_seal(token, tenant_id).encode()):
            return None
        return tenant_id

    def _cookie_attributes(self, request: Request) -> dict[str, Any]:
        """Every portal cookie's attributes: the portal's path, HttpOnly, SameSite=Strict,
        Secure over https (or as configured)."""
        return {
            "path": self._cookie_path(request),
            "secure": cookies_are_secure(request),
            "httponly": True,
            "samesite": "strict",
        }

    @staticmethod
    def _cookie_path(request: Request) -> str:
        return base_path(request) or "/"


def _tenant_seal(token: str, tenant_id: str) -> str:
    """The HMAC, keyed by the session token, that binds a tenant choice to that session."""
    message = _TENANT_PURPOSE + tenant_id.encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()
