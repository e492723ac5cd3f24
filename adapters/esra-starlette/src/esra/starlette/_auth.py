"""Bearer JWT verification: who is calling, for which tenant, from which client application.

``JwtVerifier`` is the ``mcp`` SDK's ``TokenVerifier``. A token is accepted only when, in
order: it is small enough to parse; its header names an allowed asymmetric algorithm; its
``iss`` is a configured trusted issuer that allows that algorithm; it names a key of that
issuer (by ``kid``, or the only fitting key); its signature verifies; its ``aud`` names one of
the issuer's audiences; ``exp`` (required), ``nbf`` and ``iat`` hold against the injected
clock within the issuer's leeway; and it carries ``sub``, the issuer's tenant claim and a
client-application claim, for a tenant the issuer may speak for. Anything else is refused
with a :class:`TokenRejection`, logged without any of the token's content; the SDK answers a
refused token with 401 and ``WWW-Authenticate``.

The tenant comes from the verified token and nowhere else.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import attrs
import jwt
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict

from esra.core import CallerIdentity, ClaimValue, InvocationContext, SystemClock
from esra.core.ports import Clock
from esra.starlette._issuers import ALLOWED_ALGORITHMS, TrustedIssuer

__all__ = [
    "MAX_TOKEN_CHARS",
    "AuthenticatedCaller",
    "CallerToken",
    "JwtVerifier",
    "TokenRejectedError",
    "TokenRejection",
    "caller_claims",
    "current_caller",
]

# Far above any real access token; anything longer is refused before it is decoded.
MAX_TOKEN_CHARS = 16_384
# Claims that differ on every token: keeping them would make each token a new "caller" for
# the cache's authorization fingerprint, and no policy has a use for them.
_VOLATILE_CLAIMS = frozenset({"exp", "nbf", "iat", "jti"})
# Claim names the core reserves for values it sets itself.
_RESERVED_PREFIX = "esra."

_log = logging.getLogger(__name__)
# Tokens whose signature and claims were verified, kept so a caller's next call with the
# same token skips the signature check (0.2–0.4 ms each); the times are checked every call.
VERIFIED_TOKENS_KEPT = 1024
_TIME_CLAIMS = ("exp", "nbf", "iat")


class TokenRejection(StrEnum):
    """Why a bearer token was refused (logged; the caller only ever sees 401)."""

    TOO_LARGE = "too_large"
    MALFORMED = "malformed"
    ALGORITHM_NOT_ALLOWED = "algorithm_not_allowed"
    UNKNOWN_ISSUER = "unknown_issuer"
    UNKNOWN_KEY = "unknown_key"
    BAD_SIGNATURE = "bad_signature"
    WRONG_AUDIENCE = "wrong_audience"
    EXPIRED = "expired"
    NOT_YET_VALID = "not_yet_valid"
    MISSING_CLAIM = "missing_claim"
    TENANT_NOT_TRUSTED = "tenant_not_trusted"


class TokenRejectedError(Exception):
    """A bearer token failed verification; ``reason`` says which check refused it."""

    def __init__(self, reason: TokenRejection) -> None:
        super().__init__(f"bearer token refused: {reason.value}")
        self.reason = reason


@attrs.frozen
class AuthenticatedCaller:
    """The verified caller: tenant, client application, subject and claims from one token."""

    issuer: str
    tenant_id: str
    client_app_id: str
    subject: str
    claims: Mapping[str, ClaimValue] = attrs.field(factory=dict, repr=False)
    # The tenants the token's issuer may speak for (None: every tenant). A caller built
    # without it is trusted for its own tenant only, so forgetting it never widens trust.
    issuer_tenants: frozenset[str] | None = attrs.field(
        default=attrs.Factory(lambda caller: frozenset({caller.tenant_id}), takes_self=True)
    )

    def issuer_trusts(self, tenant_id: str) -> bool:
        """Whether the token's issuer may speak for ``tenant_id`` (the check its own tenant
        passed at verification), e.g. before honouring a role on another tenant."""
        return self.issuer_tenants is None or tenant_id in self.issuer_tenants

    def context(self, exposure_slug: str, correlation_id: str) -> InvocationContext:
        """The invocation context of a call to the exposure ``exposure_slug``."""
        return InvocationContext(
            tenant_id=self.tenant_id,
            client_app_id=self.client_app_id,
            caller=CallerIdentity(subject=self.subject, claims=self.claims, issuer=self.issuer),
            exposure_slug=exposure_slug,
            correlation_id=correlation_id,
        )


class CallerToken(AccessToken):
    """The SDK's ``AccessToken`` carrying the typed caller it was verified into.

    ``claims`` also holds the token's claims and ``iss``, as the SDK expects, but the host
    reads only ``caller``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    caller: AuthenticatedCaller


def current_caller() -> AuthenticatedCaller | None:
    """The caller of the request being handled, or ``None`` when it was not authenticated."""
    token = get_access_token()
    return token.caller if isinstance(token, CallerToken) else None


@attrs.frozen
class _Verified:
    """What verifying one token established, bar the times, which are re-checked per call."""

    caller: AuthenticatedCaller
    audience: str
    scopes: tuple[str, ...]
    times: Mapping[str, Any]
    issuer: TrustedIssuer


class JwtVerifier:
    """Verifies bearer JWTs against trusted issuers (the SDK's ``TokenVerifier``).

    A token verified once is remembered (by its SHA-256, at most ``VERIFIED_TOKENS_KEPT``,
    least recently used first out): its signature, issuer, audience and claims are facts of
    the token's exact bytes and the issuers' keys, which never change for a verifier, so the
    same token need not be verified again. Its ``exp``, ``nbf`` and ``iat`` are checked on
    every call against the clock, so a remembered token still expires on time. Refused
    tokens are not remembered.

    Args:
        issuers: the trusted issuers; each ``iss`` value may appear once.
        clock: time source for ``exp``, ``nbf`` and ``iat`` (defaults to the system clock).
    """

    def __init__(self, issuers: Iterable[TrustedIssuer], *, clock: Clock | None = None) -> None:
        self._issuers: dict[str, TrustedIssuer] = {}
        for issuer in issuers:
            if issuer.issuer in self._issuers:
                msg = f"issuer {issuer.issuer!r} is configured twice"
                raise ValueError(msg)
            self._issuers[issuer.issuer] = issuer
        self._clock = clock or SystemClock()
        self._verified: OrderedDict[bytes, _Verified] = OrderedDict()

    @property
    def issuers(self) -> tuple[TrustedIssuer, ...]:
        """The trusted issuers, in configuration order."""
        return tuple(self._issuers.values())

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the token's ``CallerToken``, or ``None`` (the SDK then answers 401)."""
        try:
            caller, audience, scopes = self._verify(token)
        except TokenRejectedError as exc:
            _log.info("bearer token refused: %s", exc.reason.value)
            return None
        except Exception:
            # Fail closed: a verification bug refuses the token instead of answering 500.
            _log.exception("bearer token verification failed unexpectedly")
            return None
        return CallerToken(
            token=token,
            client_id=caller.client_app_id,
            scopes=scopes,
            # Left unset on purpose: expiry was checked above with the issuer's leeway and the
            # injected clock; the SDK would re-check it against the wall clock without leeway.
            expires_at=None,
            resource=audience,
            subject=caller.subject,
            claims={**caller.claims, "iss": caller.issuer},
            caller=caller,
        )

    def authenticate(self, token: str) -> AuthenticatedCaller:
        """Verify ``token`` and return its caller.

        Raises:
            TokenRejectedError: the token is refused; ``reason`` says by which check.
        """
        return self._verify(token)[0]

    def _verify(self, token: str) -> tuple[AuthenticatedCaller, str, list[str]]:
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRejectedError(TokenRejection.TOO_LARGE)
        digest = hashlib.sha256(token.encode()).digest()
        known = self._verified.get(digest)
        if known is not None:
            self._check_times(known.times, known.issuer)
            self._verified.move_to_end(digest)
            return known.caller, known.audience, list(known.scopes)
        verified = self._verify_fully(token)
        self._verified[digest] = verified
        if len(self._verified) > VERIFIED_TOKENS_KEPT:
            self._verified.popitem(last=False)
        return verified.caller, verified.audience, list(verified.scopes)

    def _verify_fully(self, token: str) -> _Verified:
        try:
            # Read unverified only to choose the issuer's keys; the signature check below
            # then binds this ``iss`` (PyJWT compares it again after verifying). One parse
            # yields both the (validated) header and the payload: decoding a token's base64
            # segments is most of what verification costs besides the signature.
            unverified_token = jwt.decode_complete(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise TokenRejectedError(TokenRejection.MALFORMED) from None
        header: dict[str, Any] = unverified_token["header"]
        unverified: dict[str, Any] = unverified_token["payload"]
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in ALLOWED_ALGORITHMS:
            raise TokenRejectedError(TokenRejection.ALGORITHM_NOT_ALLOWED)
        claimed_issuer = unverified.get("iss")
        issuer = self._issuers.get(claimed_issuer) if isinstance(claimed_issuer, str) else None
        if issuer is None:
            raise TokenRejectedError(TokenRejection.UNKNOWN_ISSUER)
        if algorithm not in issuer.algorithms:
            raise TokenRejectedError(TokenRejection.ALGORITHM_NOT_ALLOWED)
        kid = header.get("kid")
        key = issuer.key_for(kid, algorithm) if kid is None or isinstance(kid, str) else None
        if key is None:
            raise TokenRejectedError(TokenRejection.UNKNOWN_KEY)
        payload = _decode(token, key, algorithm, issuer)
        self._check_times(payload, issuer)
        return _Verified(
            caller=_caller(payload, issuer),
            audience=_matched_audience(payload, issuer),
            scopes=tuple(_scopes(payload)),
            times={name: payload[name] for name in _TIME_CLAIMS if name in payload},
            issuer=issuer,
        )

    def _check_times(self, payload: Mapping[str, Any], issuer: TrustedIssuer) -> None:
        now = self._clock.now().timestamp()
        leeway = issuer.leeway_s
        expires = _number(payload.get("exp"))  # present: decoding required it
        if expires is None:
            raise TokenRejectedError(TokenRejection.MALFORMED)
        if now > expires + leeway:
            raise TokenRejectedError(TokenRejection.EXPIRED)
        for name in ("nbf", "iat"):
            if name not in payload:
                continue
            moment = _number(payload[name])
            if moment is None:
                raise TokenRejectedError(TokenRejection.MALFORMED)
            if moment > now + leeway:
                raise TokenRejectedError(TokenRejection.NOT_YET_VALID)


def _decode(token: str, key: jwt.PyJWK, algorithm: str, issuer: TrustedIssuer) -> dict[str, Any]:
    try:
        return jwt.decode(
            token,
            key=key,
            algorithms=[algorithm],
            audience=list(issuer.audiences),
            issuer=issuer.issuer,
            options={
                "require": ["iss", "aud", "exp", "sub"],
                # Checked by the verifier against its injected clock (see _check_times).
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
            },
        )
    except jwt.InvalidSignatureError:
        raise TokenRejectedError(TokenRejection.BAD_SIGNATURE) from None
    except jwt.InvalidAudienceError:
        raise TokenRejectedError(TokenRejection.WRONG_AUDIENCE) from None
    except jwt.MissingRequiredClaimError:
        raise TokenRejectedError(TokenRejection.MISSING_CLAIM) from None
    except jwt.InvalidIssuerError:
        raise TokenRejectedError(TokenRejection.UNKNOWN_ISSUER) from None
    except jwt.PyJWTError:
        raise TokenRejectedError(TokenRejection.MALFORMED) from None


def _number(value: object) -> float | None:
    """A time claim as seconds, or ``None`` when it is not a finite number.

    PyJWT's JSON accepts ``NaN`` and ``Infinity`` (and ``1e999`` reads as infinity): every
    comparison with NaN is false and none with infinity is true, so such an ``exp`` would
    never expire.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range
        return None
    return number if math.isfinite(number) else None


def _text_claim(payload: Mapping[str, Any], name: str) -> str | None:
    """The claim ``name`` when it is a string that names something, else ``None``.

    Blank names no one, and neither does a control character or a lone surrogate (JSON's
    ``"\ud800"``, which PyJWT keeps): a subject, tenant or client application becomes a
    caller key, audit dimensions and quota rows, and not every store can hold such text.
    """
    value = payload.get(name)
    usable = isinstance(value, str) and value.strip() and value.isprintable()
    return value if usable else None


def _caller(payload: Mapping[str, Any], issuer: TrustedIssuer) -> AuthenticatedCaller:
    subject = _text_claim(payload, "sub")
    tenant = _text_claim(payload, issuer.tenant_claim)
    client = next(
        (c for c in (_text_claim(payload, n) for n in issuer.client_claims) if c is not None),
        None,
    )
    if subject is None or tenant is None or client is None:
        raise TokenRejectedError(TokenRejection.MISSING_CLAIM)
    if not issuer.trusts_tenant(tenant):
        raise TokenRejectedError(TokenRejection.TENANT_NOT_TRUSTED)
    return AuthenticatedCaller(
        issuer=issuer.issuer,
        tenant_id=tenant,
        client_app_id=client,
        subject=subject,
        claims=caller_claims(payload),
        issuer_tenants=issuer.tenants,
    )


def caller_claims(payload: Mapping[str, Any]) -> dict[str, ClaimValue]:
    """The token's claims a policy or record filter may use, as the core's claim values.

    Strings, integers, booleans and lists of strings are kept (lists as tuples); objects,
    fractional numbers and mixed lists are dropped, as are the per-token ``exp``, ``nbf``,
    ``iat`` and ``jti`` and every name under the core's reserved ``esra.`` prefix.
    """
    claims: dict[str, ClaimValue] = {}
    for name, value in payload.items():
        if name in _VOLATILE_CLAIMS or name.startswith(_RESERVED_PREFIX):
            continue
        if isinstance(value, str | bool | int):
            claims[name] = value
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            claims[name] = tuple(value)
    return claims


def _matched_audience(payload: Mapping[str, Any], issuer: TrustedIssuer) -> str:
    audience = payload.get("aud")
    named = [audience] if isinstance(audience, str) else list(audience or ())
    return next(a for a in issuer.audiences if a in named)


def _scopes(payload: Mapping[str, Any]) -> list[str]:
    scope = payload.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = payload.get("scp")
    if isinstance(scp, list):
        return [s for s in scp if isinstance(s, str)]
    return []
