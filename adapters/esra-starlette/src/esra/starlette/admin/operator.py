"""Who is calling the admin API: the verified bearer token's subject, tenant and roles.

The host's authentication middleware has already verified the token (``JwtVerifier``);
this reads the result. Administrative roles come from one claim (``esra_roles`` unless
configured), a role name or a list of them, and hold on the token's own tenant only — a
token can never act on another tenant. Names outside ``esra.core.admin.roles.Role`` grant
nothing.
"""

from __future__ import annotations

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.requests import Request

from esra.core.admin.roles import Administrator, Grant, Role
from esra.core.docstore.management import Operator
from esra.starlette.admin.errors import AdminError, AdminErrorCode
from esra.starlette.auth import AuthenticatedCaller, CallerToken

__all__ = ["DEFAULT_ROLES_CLAIM", "administrator_of", "caller_of", "operator_of", "roles_of"]

DEFAULT_ROLES_CLAIM = "esra_roles"
_ROLE_NAMES = frozenset(role.value for role in Role)


def caller_of(request: Request) -> AuthenticatedCaller:
    """The verified caller of ``request``.

    Raises:
        AdminError: ``ESRA_UNAUTHENTICATED`` when the request carried no valid token.
    """
    user = request.scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    if not isinstance(token, CallerToken):
        raise AdminError(AdminErrorCode.ESRA_UNAUTHENTICATED, "A valid bearer token is required.")
    return token.caller


def roles_of(caller: AuthenticatedCaller, roles_claim: str) -> frozenset[str]:
    """The administrative role names ``caller``'s token grants (unknown names dropped)."""
    raw = caller.claims.get(roles_claim)
    names = (raw,) if isinstance(raw, str) else raw if isinstance(raw, tuple) else ()
    return frozenset(name for name in names if name in _ROLE_NAMES)


def operator_of(request: Request, roles_claim: str) -> Operator:
    """The document-store operator acting through ``request``."""
    caller = caller_of(request)
    return Operator(
        subject=caller.subject, tenant_id=caller.tenant_id, roles=roles_of(caller, roles_claim)
    )


def administrator_of(request: Request, roles_claim: str) -> Administrator:
    """The configuration administrator acting through ``request`` (own tenant only)."""
    caller = caller_of(request)
    grants = (Grant(Role(name), caller.tenant_id) for name in roles_of(caller, roles_claim))
    return Administrator.of(caller.subject, *grants)
