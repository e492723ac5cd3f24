"""The role model: implication rules and tenant reach, stated as properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.core.admin import Administrator, Grant, NotPermittedError, Role, implied_roles

TENANTS = ("tenant-a", "tenant-b", "tenant-c")
MANAGE_ESRA = frozenset({Role.ESRA_DATA_MANAGE, Role.ESRA_EXPOSURE_MANAGE})

roles = st.sampled_from(list(Role))
tenants = st.sampled_from(TENANTS)
grants = st.builds(Grant, roles, st.none() | tenants)
administrators = st.builds(Administrator, st.just("someone"), st.frozensets(grants, max_size=6))


def _oracle(admin: Administrator, role: Role, tenant_id: str) -> bool:
    for grant in admin.grants:
        if grant.tenant_id not in (None, tenant_id):
            continue
        if grant.role is role or (role is Role.ESRA_DATA_READ and grant.role in MANAGE_ESRA):
            return True
    return False


@given(administrators, roles, tenants)
def test_may_matches_the_stated_rules(admin: Administrator, role: Role, tenant: str) -> None:
    assert admin.may(role, tenant) is _oracle(admin, role, tenant)
    assert (role in admin.roles_on(tenant)) is admin.may(role, tenant)


@given(st.sampled_from(sorted(MANAGE_ESRA)), st.none() | tenants, tenants)
def test_each_esra_manage_role_implies_read(role: Role, scope: str | None, tenant: str) -> None:
    admin = Administrator.of("m", Grant(role, scope))
    if scope in (None, tenant):
        assert admin.may(Role.ESRA_DATA_READ, tenant)


@given(st.sampled_from(sorted(MANAGE_ESRA)), st.none() | tenants, tenants)
def test_data_and_exposure_manage_do_not_imply_each_other(
    role: Role, scope: str | None, tenant: str
) -> None:
    (other,) = MANAGE_ESRA - {role}
    assert not Administrator.of("m", Grant(role, scope)).may(other, tenant)


@given(st.sampled_from([Role.SECURITY_MANAGE, Role.GOVERNANCE_MANAGE]), tenants)
def test_platform_roles_imply_nothing_in_the_esra_area(role: Role, tenant: str) -> None:
    assert implied_roles(role) == {role}
    assert Administrator.of("p", Grant(role, None)).roles_on(tenant) == {role}


@given(st.frozensets(roles, min_size=1), tenants, tenants, roles)
def test_a_tenant_grant_never_reaches_another_tenant(
    held: frozenset[Role], home: str, other: str, asked: Role
) -> None:
    admin = Administrator("t", frozenset(Grant(r, home) for r in held))
    if other != home:
        assert not admin.may(asked, other)
        with pytest.raises(NotPermittedError):
            admin.require(asked, other)


@given(roles, tenants)
def test_a_grant_without_tenant_reaches_every_tenant(role: Role, tenant: str) -> None:
    assert Administrator.of("op", Grant(role, None)).may(role, tenant)


def test_read_implies_nothing_and_an_empty_administrator_may_nothing() -> None:
    reader = Administrator.of("r", Grant(Role.ESRA_DATA_READ, "tenant-a"))
    assert reader.roles_on("tenant-a") == {Role.ESRA_DATA_READ}
    assert Administrator("nobody").roles_on("tenant-a") == frozenset()


def test_grant_accepts_a_role_name() -> None:
    assert Grant("ESRA_DATA_MANAGE", "tenant-a").role is Role.ESRA_DATA_MANAGE
    with pytest.raises(ValueError, match="ESRA_ADMIN"):
        Grant("ESRA_ADMIN", None)
