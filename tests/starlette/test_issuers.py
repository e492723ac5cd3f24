"""TrustedIssuer.build: unsafe or unusable issuer settings are refused before serving."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from esra.starlette._issuers import IssuerError, TrustedIssuer
from tests.starlette._tokens import AUDIENCE, ISSUER, idp


def _build(**overrides: Any) -> TrustedIssuer:
    settings: dict[str, Any] = {
        "issuer": ISSUER,
        "audiences": (AUDIENCE,),
        "jwks": idp().jwks(),
        "algorithms": ("RS256",),
        **overrides,
    }
    return TrustedIssuer.build(**settings)


def _refused(**overrides: Any) -> IssuerError:
    with pytest.raises(IssuerError) as refused:
        _build(**overrides)
    return refused.value


@pytest.mark.parametrize("algorithm", ["none", "HS256", "HS512", "RS1"])
def test_symmetric_and_unsigned_algorithms_cannot_be_allowed(algorithm: str) -> None:
    """Only asymmetric algorithms may be configured: never ``none``, never HS*."""
    error = _refused(algorithms=("RS256", algorithm))
    assert error.setting == "algorithms"
    assert algorithm in error.problem


def test_a_symmetric_key_in_the_jwks_is_refused() -> None:
    """An ``oct`` key would let anyone holding it forge tokens; it is never trusted."""
    error = _refused(jwks={"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]})
    assert error.setting == "jwks"


def test_private_key_material_in_the_jwks_is_refused() -> None:
    """A JWKS holding a private key is a leak waiting to happen: refused."""
    public = idp().jwks()["keys"][0]
    error = _refused(jwks={"keys": [{**public, "d": "AQAB"}]})
    assert "private" in error.problem


def test_a_short_rsa_key_is_refused() -> None:
    """RSA keys under 2048 bits are refused."""
    # A weak key is the point of this test.
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024).public_key()  # noqa: S505
    error = _refused(jwks={"keys": [RSAAlgorithm.to_jwk(weak, as_dict=True)]})
    assert "2048" in error.problem


def test_keys_that_fit_no_allowed_algorithm_are_not_used() -> None:
    """With RS256 only, the EC and Ed25519 keys are dropped; with none fitting, refused."""
    issuer = _build()
    assert [k.kid for k in issuer.keys] == ["rsa-1"]
    ec_only = {"keys": [k for k in idp().jwks()["keys"] if k["kty"] == "EC"]}
    assert _refused(jwks=ec_only).setting == "jwks"


def test_a_key_declaring_its_algorithm_serves_only_that_algorithm() -> None:
    """A JWK with ``alg: PS256`` is not used for RS256 tokens."""
    rsa_key = {**idp().jwks()["keys"][0], "alg": "PS256"}
    issuer = _build(jwks={"keys": [rsa_key]}, algorithms=("RS256", "PS256"))
    assert issuer.key_for("rsa-1", "PS256") is not None
    assert issuer.key_for("rsa-1", "RS256") is None


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"issuer": ""}, "issuer"),
        ({"audiences": ()}, "audiences"),
        ({"algorithms": ()}, "algorithms"),
        ({"tenant_claim": ""}, "tenant_claim"),
        ({"client_claims": ()}, "client_claims"),
        ({"leeway_s": 301}, "leeway_s"),
        ({"leeway_s": -1}, "leeway_s"),
        ({"tenants": ()}, "tenants"),
        ({"jwks": {"keys": []}}, "jwks"),
        ({"jwks": {"keys": [{"kty": "RSA", "n": "x", "e": "AQAB"}]}}, "jwks"),
    ],
)
def test_each_unusable_setting_is_named(overrides: dict[str, Any], setting: str) -> None:
    """The error names the setting that is wrong."""
    assert _refused(**overrides).setting == setting


def test_duplicate_kids_are_refused() -> None:
    """Two keys under one kid would make the key a token names ambiguous."""
    key = idp().jwks()["keys"][0]
    assert "kid" in _refused(jwks={"keys": [key, key]}).problem


@pytest.mark.parametrize("setting", ["audiences", "algorithms", "client_claims", "tenants"])
def test_one_string_where_a_list_is_expected_is_refused(setting: str) -> None:
    """Iterated, ``tenants="acme"`` trusted tenants ``a``, ``c``, ``m`` and ``e`` (found by a
    hostile review); every list setting refuses a lone string."""
    refused = _refused(**{setting: "RS256" if setting == "algorithms" else "acme"})
    assert setting in str(refused)
    assert "not one string" in str(refused)
