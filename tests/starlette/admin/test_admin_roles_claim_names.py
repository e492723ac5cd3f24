"""The two role claims must be two claims: one read as both made every role cross-tenant.

``admin_app(roles_claim=…, cross_tenant_roles_claim=…)`` took any two names. Given the
same name twice, every role a token held on its own tenant was also read as a grant with
no tenant, so tenant B's plain reader read tenant A's configuration through
``ESRA-Tenant`` — every tenant administrator silently became a cross-tenant operator. A
blank name, or one under the reserved ``esra.`` prefix (which the host never keeps among a
caller's claims), could only ever grant nothing: a setting that cannot work is refused
when the app is built, not discovered as a 403 for everyone.
"""

from __future__ import annotations

import pytest

from esra.core._static_config import StaticConfigRepository
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.starlette._admin import admin_app
from esra.starlette._admin.operator import RoleClaims
from tests.starlette._tokens import NOW
from tests.starlette._world import snapshot_a, snapshot_b


def _build(roles_claim: str, cross_tenant_roles_claim: str) -> None:
    config = StaticConfigRepository([snapshot_a(), snapshot_b()])
    admin_app(
        config=config,
        publisher=config,
        stores={},
        audit=InMemoryAuditSink(),
        clock=FakeClock(NOW),
        roles_claim=roles_claim,
        cross_tenant_roles_claim=cross_tenant_roles_claim,
    )


@pytest.mark.parametrize("name", ["esra_roles", "esra_cross_tenant_roles", "roles"])
def test_one_claim_named_for_both_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="different claims"):
        _build(name, name)


@pytest.mark.parametrize(
    ("roles_claim", "cross_tenant_roles_claim"),
    [("", "esra_cross_tenant_roles"), ("esra_roles", ""), ("esra_roles", "  ")],
)
def test_a_blank_claim_name_is_refused(roles_claim: str, cross_tenant_roles_claim: str) -> None:
    with pytest.raises(ValueError, match="must name a claim"):
        _build(roles_claim, cross_tenant_roles_claim)


@pytest.mark.parametrize(
    ("roles_claim", "cross_tenant_roles_claim"),
    [("esra.roles", "esra_cross_tenant_roles"), ("esra_roles", "esra.cross")],
)
def test_a_claim_name_the_host_never_keeps_is_refused(
    roles_claim: str, cross_tenant_roles_claim: str
) -> None:
    with pytest.raises(ValueError, match="reserved"):
        _build(roles_claim, cross_tenant_roles_claim)


def test_two_distinct_names_are_kept() -> None:
    claims = RoleClaims("groups", "operator_groups")
    assert (claims.roles, claims.cross_tenant_roles) == ("groups", "operator_groups")
    _build("groups", "operator_groups")
