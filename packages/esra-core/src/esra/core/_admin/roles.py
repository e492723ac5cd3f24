"""Administrative roles and grants: the ESRA & Data area plus the platform's two roles.

A grant names a role and either a tenant or none; a grant with no tenant is what makes an
operator cross-tenant (there is no separate role name for it). Both ESRA manage roles
imply ``ESRA_DATA_READ``; neither implies the other. The platform's ``SECURITY_MANAGE`` and
``GOVERNANCE_MANAGE`` imply nothing in the ESRA area, so granting ESRA roles never widens a
platform administrator's authority, and holding a platform role never widens an ESRA one.

An administrator may also know its home tenant (the tenant its token belongs to): acting on
any other tenant is then cross-tenant, and every audit record of such an action says so
(:meth:`Administrator.acting_dimensions`).
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from esra.core._audit.record import AuditDimension
from esra.core.codes import ErrorCode
from esra.core.exceptions import ConfigurationError, EsraError

__all__ = ["Administrator", "Grant", "GrantError", "NotPermittedError", "Role", "implied_roles"]


class Role(StrEnum):
    """An administrative role. The first three form the ESRA & Data area."""

    ESRA_DATA_READ = "ESRA_DATA_READ"
    ESRA_DATA_MANAGE = "ESRA_DATA_MANAGE"
    ESRA_EXPOSURE_MANAGE = "ESRA_EXPOSURE_MANAGE"
    SECURITY_MANAGE = "SECURITY_MANAGE"
    GOVERNANCE_MANAGE = "GOVERNANCE_MANAGE"


_IMPLIES: dict[Role, frozenset[Role]] = {
    Role.ESRA_DATA_MANAGE: frozenset({Role.ESRA_DATA_READ}),
    Role.ESRA_EXPOSURE_MANAGE: frozenset({Role.ESRA_DATA_READ}),
}


def implied_roles(role: Role) -> frozenset[Role]:
    """Return ``role`` and every role it implies."""
    return frozenset({role}) | _IMPLIES.get(role, frozenset())


class NotPermittedError(EsraError):
    """The administrator lacks the role this action needs, or the action does not apply."""

    code = ErrorCode.ESRA_INVALID_REQUEST
    public_message = "This action is not permitted."


class GrantError(ConfigurationError, ValueError):
    """A grant names no exact role, or a tenant that is neither an id nor ``None``.

    Also a ``ValueError``, which is what ``Grant`` raised for an unknown role before it was
    classified, so callers catching that keep working.
    """


_ROLES_BY_NAME = {role.value: role for role in Role}


def _exact_role(name: object) -> Role:
    """``name`` as the role it spells exactly; anything else is refused, classified.

    Exact only: a case variant, padding or a Unicode look-alike of a role name is not that
    role, so it must never be folded into one (and ``enum``'s bare ``ValueError`` is not an
    ESRA error).
    """
    role = _ROLES_BY_NAME.get(name) if isinstance(name, str) else None
    if role is None:
        shown = repr(name) if isinstance(name, str) and name.isprintable() else "this value"
        msg = f"a grant's role must be one of {', '.join(_ROLES_BY_NAME)}, not {shown}"
        raise GrantError(msg)
    return role


def _named_tenant(
    _grant: object, _attribute: attrs.Attribute[str | None], tenant_id: str | None
) -> None:
    """Only ``None`` means every tenant: a blank or non-text tenant is a mistake to refuse,
    not something to read as "no tenant" somewhere and as a tenant elsewhere."""
    if tenant_id is not None and not (isinstance(tenant_id, str) and tenant_id.strip()):
        msg = "a grant's tenant must be a tenant id, or None for every tenant"
        raise GrantError(msg)


@attrs.frozen
class Grant:
    """``role`` over ``tenant_id``; ``None`` grants it over every tenant (an operator).

    Raises:
        GrantError: ``role`` is not exactly a role's name, or ``tenant_id`` is neither
            ``None`` nor a non-blank tenant id.
    """

    role: Role = attrs.field(converter=_exact_role)
    tenant_id: str | None = attrs.field(default=None, validator=_named_tenant)

    def covers(self, role: Role, tenant_id: str) -> bool:
        """Whether this grant alone permits ``role`` on ``tenant_id``."""
        in_scope = self.tenant_id is None or self.tenant_id == tenant_id
        return in_scope and role in implied_roles(self.role)


@attrs.frozen
class Administrator:
    """An authenticated administrator and the grants they hold.

    ``home_tenant_id`` is the tenant the administrator belongs to (None when unknown, e.g.
    built from configuration rather than a token); it grants nothing by itself.
    """

    subject: str
    grants: frozenset[Grant] = frozenset()
    home_tenant_id: str | None = None

    @classmethod
    def of(cls, subject: str, *grants: Grant, home_tenant_id: str | None = None) -> Administrator:
        """Build an administrator holding ``grants``."""
        return cls(subject, frozenset(grants), home_tenant_id)

    def acts_across_tenants(self, tenant_id: str) -> bool:
        """Whether acting on ``tenant_id`` is acting outside the administrator's home tenant."""
        return self.home_tenant_id is not None and self.home_tenant_id != tenant_id

    def acting_dimensions(self, tenant_id: str) -> dict[str, AuditDimension]:
        """What an audit record of an action on ``tenant_id`` adds about who acted from where.

        Empty for an action on the home tenant; otherwise ``cross_tenant`` and
        ``operator_tenant`` (the home tenant), so tenant B's audit shows that tenant A's
        operator acted, denials included.
        """
        if not self.acts_across_tenants(tenant_id):
            return {}
        return {"cross_tenant": True, "operator_tenant": self.home_tenant_id}

    def may(self, role: Role, tenant_id: str) -> bool:
        """Whether any grant permits ``role`` on ``tenant_id``."""
        return any(grant.covers(role, tenant_id) for grant in self.grants)

    def require(self, role: Role, tenant_id: str) -> None:
        """Raise ``NotPermittedError`` unless ``may(role, tenant_id)``."""
        if not self.may(role, tenant_id):
            raise NotPermittedError

    def roles_on(self, tenant_id: str) -> frozenset[Role]:
        """Every role, implied ones included, this administrator holds on ``tenant_id``."""
        return frozenset(r for r in Role if self.may(r, tenant_id))
