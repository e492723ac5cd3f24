"""TrustedIssuer: one identity provider whose signed access tokens the host accepts.

An issuer is trusted with a static JWKS (from configuration or a file, never fetched at
request time), the audiences its tokens must name, an allowlist of asymmetric algorithms,
the claim that carries the tenant and the tenants it may speak for. Everything is checked
when the issuer is built, so a verifier never meets a key it cannot use safely: symmetric
keys, private key material, RSA keys under 2048 bits and keys whose type does not fit an
allowed algorithm are refused here, with a message naming the problem.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

__all__ = [
    "ALLOWED_ALGORITHMS",
    "DEFAULT_CLIENT_CLAIMS",
    "DEFAULT_LEEWAY_S",
    "DEFAULT_TENANT_CLAIM",
    "IssuerError",
    "SigningKey",
    "TrustedIssuer",
]

# Asymmetric signatures only: ``none`` and every HS* algorithm are absent on purpose, so a
# token can never be "verified" with a public key used as an HMAC secret.
ALLOWED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
DEFAULT_TENANT_CLAIM = "esra_tenant"
DEFAULT_CLIENT_CLAIMS = ("azp", "client_id")
DEFAULT_LEEWAY_S = 60.0
MAX_LEEWAY_S = 300.0
MIN_RSA_BITS = 2048

_RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
_EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_OKP_CURVES = frozenset({"Ed25519", "Ed448"})
# JWK members that only a private (or symmetric) key has.
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


class IssuerError(ValueError):
    """A trusted issuer's setting is unusable: ``setting`` names it, ``problem`` says why."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting
        self.problem = problem


def _fits(jwk: Mapping[str, Any], algorithm: str) -> bool:
    """Whether a key of this type and curve may verify ``algorithm`` signatures."""
    kty = jwk.get("kty")
    if algorithm in _RSA_ALGORITHMS:
        return kty == "RSA"
    if algorithm in _EC_CURVES:
        return kty == "EC" and jwk.get("crv") == _EC_CURVES[algorithm]
    return algorithm == "EdDSA" and kty == "OKP" and jwk.get("crv") in _OKP_CURVES


@attrs.frozen
class SigningKey:
    """One public key of an issuer, prepared for each algorithm it may verify."""

    kid: str | None
    by_algorithm: Mapping[str, jwt.PyJWK] = attrs.field(repr=False)


def _signing_key(jwk: Any, algorithms: frozenset[str], where: str) -> SigningKey | None:
    """Prepare one JWK; ``None`` for a key that does not fit any allowed algorithm."""
    if not isinstance(jwk, Mapping):
        raise IssuerError("jwks", f"{where} is not a JSON object")
    if _PRIVATE_MEMBERS & jwk.keys():
        raise IssuerError(
            "jwks", f"{where} holds private or symmetric key material; publish public keys"
        )
    if jwk.get("kty") not in {"RSA", "EC", "OKP"}:
        raise IssuerError(
            "jwks", f"{where} has kty {jwk.get('kty')!r}; only RSA, EC and OKP are trusted"
        )
    if jwk.get("use", "sig") != "sig":
        return None
    kid = jwk.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise IssuerError("jwks", f"{where} has a kid that is not a string")
    declared = jwk.get("alg")
    candidates = algorithms if declared is None else algorithms & {declared}
    prepared: dict[str, jwt.PyJWK] = {}
    for algorithm in sorted(candidates):
        if not _fits(jwk, algorithm):
            continue
        try:
            key = jwt.PyJWK(dict(jwk), algorithm=algorithm)
        except jwt.PyJWTError as exc:
            raise IssuerError("jwks", f"{where} is not a valid {algorithm} public key") from exc
        if isinstance(key.key, rsa.RSAPublicKey) and key.key.key_size < MIN_RSA_BITS:
            raise IssuerError("jwks", f"{where} is an RSA key under {MIN_RSA_BITS} bits")
        prepared[algorithm] = key
    return SigningKey(kid=kid, by_algorithm=prepared) if prepared else None


def _listed(setting: str, values: Iterable[str]) -> tuple[str, ...]:
    """``values`` as a tuple; one string is refused, since iterating it would trust each of
    its characters (``tenants="acme"`` would trust tenants ``a``, ``c``, ``m`` and ``e``)."""
    if isinstance(values, str):
        raise IssuerError(setting, "must be a list of names, not one string")
    return tuple(values)


@attrs.frozen
class TrustedIssuer:
    """An issuer whose tokens the host accepts; build it with :meth:`build`.

    Attributes:
        issuer: the exact ``iss`` value its tokens carry.
        audiences: a token must name at least one of them in ``aud``.
        algorithms: the signature algorithms accepted from this issuer.
        keys: its public signing keys.
        tenant_claim: the claim naming the caller's tenant.
        client_claims: the claims naming the client application, first present wins.
        leeway_s: clock skew tolerated on ``exp``, ``nbf`` and ``iat``.
        tenants: the tenants this issuer may speak for; ``None`` trusts it for every tenant
            the host serves.
        advertised: whether the protected-resource metadata names it among the
            ``authorization_servers``. A host serving several tenants may keep a tenant's
            own identity provider out of a document anyone can read, since it would name
            the tenant; its tokens are accepted either way.
    """

    issuer: str
    audiences: tuple[str, ...]
    algorithms: frozenset[str]
    keys: tuple[SigningKey, ...] = attrs.field(repr=False)
    tenant_claim: str = DEFAULT_TENANT_CLAIM
    client_claims: tuple[str, ...] = DEFAULT_CLIENT_CLAIMS
    leeway_s: float = DEFAULT_LEEWAY_S
    tenants: frozenset[str] | None = None
    advertised: bool = True

    @classmethod
    def build(
        cls,
        *,
        issuer: str,
        audiences: Iterable[str],
        jwks: Mapping[str, Any],
        algorithms: Iterable[str] = ("RS256",),
        tenant_claim: str = DEFAULT_TENANT_CLAIM,
        client_claims: Iterable[str] = DEFAULT_CLIENT_CLAIMS,
        leeway_s: float = DEFAULT_LEEWAY_S,
        tenants: Iterable[str] | None = None,
        advertised: bool = True,
    ) -> TrustedIssuer:
        """Check every setting and prepare the keys of ``jwks`` (a JWK Set document).

        Raises:
            IssuerError: a setting is unusable; the message says which and why.
        """
        if not issuer:
            raise IssuerError("issuer", "must not be empty")
        audience_list = _listed("audiences", audiences)
        if not audience_list or not all(isinstance(a, str) and a for a in audience_list):
            raise IssuerError("audiences", "must name at least one non-empty audience")
        allowed = frozenset(_listed("algorithms", algorithms))
        refused = sorted(allowed - ALLOWED_ALGORITHMS)
        if refused:
            raise IssuerError(
                "algorithms",
                f"{refused[0]!r} is not allowed; use {', '.join(sorted(ALLOWED_ALGORITHMS))}",
            )
        if not allowed:
            raise IssuerError("algorithms", "must name at least one algorithm")
        if not tenant_claim:
            raise IssuerError("tenant_claim", "must not be empty")
        claims = _listed("client_claims", client_claims)
        if not claims or not all(claims):
            raise IssuerError("client_claims", "must name at least one claim")
        if not 0 <= leeway_s <= MAX_LEEWAY_S:
            raise IssuerError("leeway_s", f"must be between 0 and {MAX_LEEWAY_S:g} seconds")
        tenant_set = None if tenants is None else frozenset(_listed("tenants", tenants))
        if tenant_set is not None and (not tenant_set or not all(tenant_set)):
            raise IssuerError("tenants", "must name at least one tenant")
        return cls(
            issuer=issuer,
            audiences=audience_list,
            algorithms=allowed,
            keys=_keys(jwks, allowed),
            tenant_claim=tenant_claim,
            client_claims=claims,
            leeway_s=float(leeway_s),
            tenants=tenant_set,
            advertised=advertised,
        )

    def key_for(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        """The key a token with header ``kid`` and ``alg`` must verify against, if any.

        A token naming a ``kid`` gets that key only; a token without one is accepted only
        when exactly one key fits its algorithm, so a verifier never tries keys in turn.
        """
        if algorithm not in self.algorithms:
            return None
        if kid is not None:
            key = next((k for k in self.keys if k.kid == kid), None)
            return None if key is None else key.by_algorithm.get(algorithm)
        fitting = [k.by_algorithm[algorithm] for k in self.keys if algorithm in k.by_algorithm]
        return fitting[0] if len(fitting) == 1 else None

    def trusts_tenant(self, tenant_id: str) -> bool:
        """Whether this issuer may assert ``tenant_id``."""
        return self.tenants is None or tenant_id in self.tenants


def _keys(jwks: Mapping[str, Any], algorithms: frozenset[str]) -> tuple[SigningKey, ...]:
    members = jwks.get("keys") if isinstance(jwks, Mapping) else None
    if not isinstance(members, list) or not members:
        raise IssuerError("jwks", 'must be an object with a non-empty "keys" list')
    keys: list[SigningKey] = []
    for index, jwk in enumerate(members):
        key = _signing_key(jwk, algorithms, f"JWKS key {index}")
        if key is not None:
            keys.append(key)
    kids = [k.kid for k in keys if k.kid is not None]
    if len(kids) != len(set(kids)):
        raise IssuerError("jwks", "names the same kid twice")
    if not keys:
        raise IssuerError("jwks", "no key fits the allowed algorithms")
    return tuple(keys)
