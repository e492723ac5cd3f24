"""A trusted issuer's tenants as the lookups read them: exact names, never substrings.

``IssuerLookup.trusted_for`` is ``tenant_id in tenants``. Given one string where a
collection belongs (``tenants="tenant-a-eu"``, the mistake ``TrustedIssuer.build``
already refuses for its own ``tenants``), ``in`` became a substring test: the issuer
trusted only for ``tenant-a-eu`` was listed in the lookups of ``tenant-a``, ``tenant``
and even ``-``: another tenant's issuer and audiences, shown across tenants.
"""

from __future__ import annotations

import pytest

from esra.core.admin import IssuerLookup
from esra.core.exceptions import ConfigurationError

EU_ONLY = "tenant-a-eu"


@pytest.mark.parametrize("setting", ["tenants", "audiences"])
def test_one_string_where_a_list_belongs_is_refused(setting: str) -> None:
    settings: dict[str, object] = {"audiences": ("esra",), "tenants": (EU_ONLY,)}
    settings[setting] = EU_ONLY if setting == "tenants" else "esra"
    with pytest.raises(ConfigurationError, match=setting):
        IssuerLookup("https://eu.example.test", **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("asked", ["tenant-a", "tenant", "-", "eu", "TENANT-A-EU", "tenant-a-eu "])
def test_an_issuer_restricted_to_one_tenant_is_trusted_for_that_exact_name_only(
    asked: str,
) -> None:
    issuer = IssuerLookup("https://eu.example.test", ("esra",), frozenset({EU_ONLY}))
    assert issuer.trusted_for(EU_ONLY)
    assert not issuer.trusted_for(asked)


@pytest.mark.parametrize("given", [[EU_ONLY], (EU_ONLY,), {EU_ONLY}])
def test_any_collection_of_names_is_kept_as_a_frozen_set(given: object) -> None:
    issuer = IssuerLookup("https://eu.example.test", ["esra"], given)  # type: ignore[arg-type]
    assert issuer.tenants == frozenset({EU_ONLY})
    assert issuer.audiences == ("esra",)
    hash(issuer)  # a frozen lookup stays hashable whatever collection it was given


@pytest.mark.parametrize("tenants", [[""], ["  "], [EU_ONLY, 3], [None]])
def test_a_blank_or_non_text_tenant_is_refused(tenants: list[object]) -> None:
    with pytest.raises(ConfigurationError, match="tenants"):
        IssuerLookup("https://eu.example.test", ("esra",), tenants)  # type: ignore[arg-type]


def test_no_tenants_means_every_tenant() -> None:
    assert IssuerLookup("https://any.example.test", ("esra",)).trusted_for("whoever")
