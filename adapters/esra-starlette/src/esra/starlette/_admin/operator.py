"""Who is calling the admin API, and on which tenant: the verified token's subject and grants.

The host's authentication middleware has already verified the token (``JwtVerifier``);
this reads the result. Administrative roles come from two claims, each a role name or a
list of them: the roles claim (``esra_roles`` unless configured) holds roles on the token's
own tenant, and the cross-tenant roles claim (``esra_cross_tenant_roles`` unless configured)
holds roles granted with no tenant — what makes an operator cross-tenant. Names outside
``esra.core.admin.Role`` grant nothing.

A request acts on its token's own tenant unless it names another in the ``ESRA-Tenant``
header. A cross-tenant role is honoured only on a tenant the token's issuer is trusted for
(the check the token's own tenant passed at verification): an issuer restricted to tenant A
can never grant action on B, whatever its tokens claim. A caller without a grant on the
named tenant is refused exactly as a caller missing the role, so the header is no oracle
for which tenants exist.
"""

from __future__ import annotations

import attrs
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.requests import Request

from esra.core.admin import Administrator, Grant, Role
from esra.core.docstore import Operator
from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._auth import AuthenticatedCaller, CallerToken, caller_claims

__all__ = [
    "DEFAULT_CROSS_TENANT_ROLES_CLAIM",
    "DEFAULT_ROLES_CLAIM",
    "MAX_TENANT_CHARS",
    "TENANT_HEADER",
    "RoleClaims",
    "acting_tenant_of",
    "administrator_of",
    "caller_of",
    "grants_of",
    "operator_of",
    "roles_of",
]

DEFAULT_ROLES_CLAIM = "esra_roles"
DEFAULT_CROSS_TENANT_ROLES_CLAIM = "esra_cross_tenant_roles"
TENANT_HEADER = "esra-tenant"
# Far above any tenant id a host configures; a longer header is refused unread.
MAX_TENANT_CHARS = 128
_ROLE_NAMES = frozenset(role.value for role in Role)


def _claim_name(_claims: object, attribute: attrs.Attribute[str], name: object) -> None:
    setting = f"{attribute.name.replace('_', ' ')} claim"
    if not isinstance(name, str) or not name.strip():
        msg = f"the {setting} must name a claim"
        raise ValueError(msg)
    if name not in caller_claims({name: [Role.ESRA_DATA_READ.value]}):
        # A claim the host drops from every caller (``exp``, ``jti``, the reserved
        # ``esra.`` prefix, ...): the roles in it would never be read.
        msg = f"the {setting} {name!r} is reserved: the host never reads roles from it"
        raise ValueError(msg)


@attrs.frozen
class RoleClaims:
    """The token claims naming an administrator's roles: on its own tenant, and on all.

    Raises:
        ValueError: a name is blank or one the host never keeps (reserved), or both name
            the same claim — which would read every own-tenant role as a grant with no
            tenant, making each tenant's administrators cross-tenant operators.
    """

    roles: str = attrs.field(default=DEFAULT_ROLES_CLAIM, validator=_claim_name)
    cross_tenant_roles: str = attrs.field(
        default=DEFAULT_CROSS_TENANT_ROLES_CLAIM, validator=_claim_name
    )

    def __attrs_post_init__(self) -> None:
        if self.roles == self.cross_tenant_roles:
            msg = (
                "the roles claim and the cross-tenant roles claim must be different claims: "
                f"{self.roles!r} for both would grant every own-tenant role on every tenant"
            )
            raise ValueError(msg)


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


def grants_of(caller: AuthenticatedCaller, claims: RoleClaims) -> frozenset[Grant]:
    """Every grant ``caller``'s token carries.

    Own-tenant roles are granted on the token's tenant. A cross-tenant role is granted with
    no tenant when the issuer may speak for every tenant, and otherwise only on each tenant
    the issuer is trusted for: an issuer's trust bounds every grant it can make.
    """
    own = {Grant(Role(name), caller.tenant_id) for name in roles_of(caller, claims.roles)}
    cross = roles_of(caller, claims.cross_tenant_roles)
    if caller.issuer_tenants is None:
        everywhere = {Grant(Role(name), None) for name in cross}
    else:
        everywhere = {
            Grant(Role(name), tenant) for name in cross for tenant in caller.issuer_tenants
        }
    return frozenset(own | everywhere)


def acting_tenant_of(request: Request) -> str:
    """The tenant ``request`` acts on: its ``ESRA-Tenant`` header, else the token's tenant.

    Raises:
        AdminError: ``ESRA_UNAUTHENTICATED`` without a valid token; ``ESRA_INVALID_REQUEST``
            for a header that is empty, longer than ``MAX_TENANT_CHARS`` or not printable.
    """
    caller = caller_of(request)
    named = request.headers.getlist(TENANT_HEADER)
    if not named:
        return caller.tenant_id
    tenant_id = named[0]
    if (
        len(named) != 1
        or not tenant_id
        or len(tenant_id) > MAX_TENANT_CHARS
        or not tenant_id.isprintable()
        or tenant_id != tenant_id.strip()
    ):
        raise AdminError(
            AdminErrorCode.ESRA_INVALID_REQUEST,
            f"ESRA-Tenant must name one tenant id: 1 to {MAX_TENANT_CHARS} printable "
            "characters, without surrounding spaces.",
        )
    return tenant_id


def administrator_of(request: Request, claims: RoleClaims) -> Administrator:
    """The administrator acting through ``request``: its grants and its home tenant."""
    caller = caller_of(request)
    return Administrator(caller.subject, grants_of(caller, claims), home_tenant_id=caller.tenant_id)


def operator_of(request: Request, claims: RoleClaims) -> Operator:
    """The document-store operator acting through ``request`` on its acting tenant."""
    tenant_id = acting_tenant_of(request)
    return Operator.acting_for(administrator_of(request, claims), tenant_id)
