"""Test identity providers: real key pairs, a JWKS to trust, and tokens signed with them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from esra.starlette._issuers import TrustedIssuer

__all__ = [
    "AUDIENCE",
    "ISSUER",
    "NOW",
    "OTHER_ISSUER",
    "TestIdp",
    "b64url",
    "idp",
    "other_idp",
    "unsigned",
]

ISSUER = "https://login.example.test/"
OTHER_ISSUER = "https://other-login.example.test/"
AUDIENCE = "https://esra.example.test/mcp"
# The verifier and the tokens share this instant: the tests never read the wall clock.
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segment(document: Mapping[str, Any]) -> str:
    return b64url(json.dumps(document, separators=(",", ":")).encode())


def unsigned(header: Mapping[str, Any], payload: Mapping[str, Any], signature: bytes = b"") -> str:
    """A token assembled by hand, for shapes no library would sign."""
    return f"{_segment(header)}.{_segment(payload)}.{b64url(signature)}"


class TestIdp:
    """An issuer with an RSA, an EC (P-256) and an Ed25519 key, each under its own kid."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.keys: dict[str, tuple[str, PrivateKey]] = {
            "rsa-1": ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
            "ec-1": ("ES256", ec.generate_private_key(ec.SECP256R1())),
            "ed-1": ("EdDSA", ed25519.Ed25519PrivateKey.generate()),
        }

    def jwks(self) -> dict[str, Any]:
        """The public JWK Set."""
        keys = []
        for kid, (_alg, key) in self.keys.items():
            public = key.public_key()
            if isinstance(public, rsa.RSAPublicKey):
                jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
            elif isinstance(public, ec.EllipticCurvePublicKey):
                jwk = ECAlgorithm.to_jwk(public, as_dict=True)
            else:
                jwk = json.loads(OKPAlgorithm.to_jwk(public))
            keys.append({**jwk, "kid": kid})
        return {"keys": keys}

    def public_pem(self, kid: str = "rsa-1") -> bytes:
        return (
            self.keys[kid][1]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def trusted(self, **overrides: Any) -> TrustedIssuer:
        """This issuer as the host trusts it (every key, RS256/ES256/EdDSA)."""
        settings: dict[str, Any] = {
            "issuer": self.issuer,
            "audiences": (AUDIENCE,),
            "jwks": self.jwks(),
            "algorithms": ("RS256", "ES256", "EdDSA"),
            "leeway_s": 60,
            **overrides,
        }
        return TrustedIssuer.build(**settings)

    def claims(self, **overrides: Any) -> dict[str, Any]:
        """Valid claims for a caller of ``tenant-a`` from ``app-1``; ``None`` drops a claim."""
        issued = int(NOW.timestamp())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "alice",
            "azp": "app-1",
            "esra_tenant": "tenant-a",
            "iat": issued,
            "nbf": issued,
            "exp": issued + 600,
            **overrides,
        }
        return {k: v for k, v in claims.items() if v is not None}

    def token(
        self, kid: str = "rsa-1", *, headers: Mapping[str, Any] | None = None, **claims: Any
    ) -> str:
        """A token signed with the key ``kid``, over ``claims()`` with ``claims`` overrides."""
        algorithm, key = self.keys[kid]
        # A header given as None is left out (e.g. {"kid": None} for a token without kid).
        merged = {"kid": kid, **(headers or {})}
        return jwt.encode(
            self.claims(**claims),
            key,
            algorithm=algorithm,
            headers={k: v for k, v in merged.items() if v is not None},
        )

    def hs256_with_public_key(self, **claims: Any) -> str:
        """The classic confusion attack: HMAC keyed with the issuer's public RSA key."""
        header = {"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}
        signing_input = f"{_segment(header)}.{_segment(self.claims(**claims))}"
        mac = hmac.new(self.public_pem(), signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{b64url(mac)}"


@cache
def idp() -> TestIdp:
    """The trusted test issuer (keys generated once per session)."""
    return TestIdp(ISSUER)


@cache
def other_idp() -> TestIdp:
    """A second issuer with keys of its own."""
    return TestIdp(OTHER_ISSUER)
