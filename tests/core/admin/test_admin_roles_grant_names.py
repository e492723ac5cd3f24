"""A grant names a role exactly: no case folding, no look-alike, and a classified refusal.

``Grant`` converted its role with ``Role(...)``, so a misspelt role surfaced as a bare
``ValueError`` from ``enum`` rather than ESRA's classified ``ConfigurationError``. The
names themselves must never be matched loosely: a case variant or a Unicode confusable of
``ESRA_DATA_MANAGE`` grants nothing.
"""

from __future__ import annotations

import pytest

from esra.core.admin import Administrator, Grant, Role
from esra.core.exceptions import ConfigurationError

LOOK_ALIKES = [
    "esra_data_manage",
    "Esra_Data_Manage",
    "ESRA_DATA_MANAGE ",
    " ESRA_DATA_MANAGE",
    "ESRA_DΑTA_MANAGE",  # Greek capital alpha
    "ＥSRA_DATA_MANAGE",  # fullwidth E
    "ESRA_DATA_MANAGE\u200b",  # zero-width space
    "ESRA-DATA-MANAGE",
    "",
]


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_a_name_that_only_resembles_a_role_is_refused_classified(name: str) -> None:
    with pytest.raises(ConfigurationError, match="role"):
        Grant(name, "tenant-a")


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_asking_with_a_look_alike_name_is_never_permitted(name: str) -> None:
    admin = Administrator.of("m", Grant(Role.ESRA_DATA_MANAGE, None))
    assert not admin.may(name, "tenant-a")  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 1, ["ESRA_DATA_READ"], b"ESRA_DATA_READ"])
def test_a_role_that_is_not_text_is_refused_classified(value: object) -> None:
    with pytest.raises(ConfigurationError, match="role"):
        Grant(value, "tenant-a")


@pytest.mark.parametrize("tenant", ["", 7, ("tenant-a",)])
def test_a_grant_on_no_named_tenant_is_none_never_a_blank_or_other_value(tenant: object) -> None:
    # Only None means "every tenant": a blank or non-text tenant is a mistake, not an operator.
    with pytest.raises(ConfigurationError, match="tenant"):
        Grant(Role.ESRA_DATA_READ, tenant)  # type: ignore[arg-type]


def test_the_exact_name_is_accepted_and_kept_as_the_role() -> None:
    grant = Grant("ESRA_DATA_MANAGE", "tenant-a")
    assert grant.role is Role.ESRA_DATA_MANAGE
    assert Administrator.of("m", grant).may(Role.ESRA_DATA_READ, "tenant-a")
