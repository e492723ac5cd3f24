"""The embedded default's development issuer: a local signing key so a new user can call at once.

``esra serve`` (without ``--config``) trusts this issuer, and ``esra dev-token`` signs tokens
with it; both read the same key from ``<data dir>/dev-issuer.json``, created on first use
(Ed25519, readable by its owner only). The issuer is a development convenience and nothing
more: its name is reserved, ``esra serve --config`` refuses to trust it, and
``esra dev-token`` refuses to run against a configured deployment, whose tokens come from its
own identity provider.
"""

from __future__ import annotations

import json
import os
import secrets
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jwt.algorithms import OKPAlgorithm

from esra.starlette._issuers import DEFAULT_TENANT_CLAIM, TrustedIssuer

__all__ = [
    "DEFAULT_TOKEN_LIFETIME_S",
    "DEV_AUDIENCE",
    "DEV_ISSUER",
    "DEV_KEY_FILE",
    "MAX_TOKEN_LIFETIME_S",
    "RESERVED_CLAIMS",
    "DevIssuer",
    "DevIssuerError",
    "load_or_create_dev_issuer",
]

# ``.invalid`` can never resolve (RFC 2606): nobody can run an identity provider under it.
DEV_ISSUER = "https://dev-issuer.esra.invalid"
DEV_AUDIENCE = "esra-embedded"
DEV_KEY_FILE = "dev-issuer.json"
DEFAULT_TOKEN_LIFETIME_S = 3600
MAX_TOKEN_LIFETIME_S = 24 * 3600
# Claims the issuer sets itself; a caller-chosen value must never replace them.
RESERVED_CLAIMS = frozenset(
    {"iss", "aud", "sub", "exp", "nbf", "iat", "jti", "azp", "client_id", DEFAULT_TENANT_CLAIM}
)


class DevIssuerError(Exception):
    """The development issuer cannot be used as asked; the message says why."""


@attrs.frozen
class DevIssuer:
    """The development signing key and what the embedded host trusts it for."""

    kid: str
    private_key: Ed25519PrivateKey = attrs.field(repr=False)

    def trusted(self, tenants: frozenset[str]) -> TrustedIssuer:
        """The ``TrustedIssuer`` the embedded host configures for this key."""
        public = json.loads(OKPAlgorithm.to_jwk(self.private_key.public_key()))
        return TrustedIssuer.build(
            issuer=DEV_ISSUER,
            audiences=(DEV_AUDIENCE,),
            jwks={"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "EdDSA"}]},
            algorithms=("EdDSA",),
            tenant_claim=DEFAULT_TENANT_CLAIM,
            tenants=tenants,
        )

    def mint(
        self,
        *,
        tenant: str,
        subject: str,
        client_app: str,
        now: datetime,
        claims: Mapping[str, str | tuple[str, ...]] | None = None,
        lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S,
    ) -> str:
        """Sign an access token for ``subject`` of ``tenant`` calling from ``client_app``.

        Raises:
            DevIssuerError: a claim name is reserved, or the lifetime is out of range.
        """
        if not tenant or not subject or not client_app:
            raise DevIssuerError("tenant, subject and client application must not be empty")
        if not 1 <= lifetime_s <= MAX_TOKEN_LIFETIME_S:
            raise DevIssuerError(f"the lifetime must be 1 to {MAX_TOKEN_LIFETIME_S} seconds")
        extra = dict(claims or {})
        reserved = sorted(n for n in extra if n in RESERVED_CLAIMS or n.startswith("esra."))
        if reserved:
            raise DevIssuerError(f"the claim {reserved[0]!r} is set by the issuer itself")
        issued = int(now.timestamp())
        payload: dict[str, Any] = {
            **{k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()},
            "iss": DEV_ISSUER,
            "aud": DEV_AUDIENCE,
            "sub": subject,
            "azp": client_app,
            DEFAULT_TENANT_CLAIM: tenant,
            "iat": issued,
            "nbf": issued,
            "exp": issued + lifetime_s,
            "jti": uuid.uuid4().hex,
        }
        return jwt.encode(payload, self.private_key, algorithm="EdDSA", headers={"kid": self.kid})


def _read(path: Path) -> DevIssuer:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        key = serialization.load_pem_private_key(document["private_key"].encode(), password=None)
        kid = document["kid"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        msg = f"{path} is not a usable development key; delete it to create a new one"
        raise DevIssuerError(msg) from exc
    if not isinstance(key, Ed25519PrivateKey) or not isinstance(kid, str):
        msg = f"{path} is not a usable development key; delete it to create a new one"
        raise DevIssuerError(msg)
    return DevIssuer(kid=kid, private_key=key)


def load_or_create_dev_issuer(data_dir: Path) -> DevIssuer:
    """Return the development issuer stored in ``data_dir``, creating it on first use.

    Creation is atomic (the key is linked into place whole), so ``esra serve`` and
    ``esra dev-token`` started together still end up with one key, readable by its owner
    only.

    Raises:
        DevIssuerError: the stored key is unreadable or damaged.
    """
    path = data_dir / DEV_KEY_FILE
    if path.exists():
        return _read(path)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    issuer = DevIssuer(kid=f"dev-{secrets.token_hex(4)}", private_key=key)
    document = json.dumps({"kid": issuer.kid, "issuer": DEV_ISSUER, "private_key": pem})
    # Written whole under a private name, then linked into place: link() fails if the file
    # exists, so a concurrent reader never sees a half-written key.
    staging = data_dir / f".{DEV_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(document)
        try:
            os.link(staging, path)
        except FileExistsError:
            return _read(path)  # created meanwhile by another esra process
    finally:
        staging.unlink(missing_ok=True)
    return issuer
