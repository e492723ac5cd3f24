"""JwtVerifier: real signed tokens are accepted; every hostile or broken one is refused."""

from __future__ import annotations

from typing import Any

import pytest

from esra.core.testing import FakeClock
from esra.starlette import _auth as auth_module
from esra.starlette._auth import (
    MAX_TOKEN_CHARS,
    CallerToken,
    JwtVerifier,
    TokenRejectedError,
    TokenRejection,
    caller_claims,
)
from tests.starlette._tokens import AUDIENCE, NOW, TestIdp, b64url, idp, other_idp, unsigned


def _verifier(**overrides: Any) -> JwtVerifier:
    return JwtVerifier(
        [idp().trusted(**overrides), other_idp().trusted(tenants=("tenant-b",))],
        clock=FakeClock(NOW),
    )


def _refused(token: str, **overrides: Any) -> TokenRejection:
    with pytest.raises(TokenRejectedError) as refused:
        _verifier(**overrides).authenticate(token)
    return refused.value.reason


@pytest.mark.parametrize("kid", ["rsa-1", "ec-1", "ed-1"])
def test_a_token_signed_by_a_trusted_issuer_names_its_caller(kid: str) -> None:
    """RS256, ES256 and EdDSA tokens verify and yield tenant, client app, subject, claims."""
    caller = _verifier().authenticate(idp().token(kid, region=["emea", "amer"], level=3))
    assert caller.tenant_id == "tenant-a"
    assert caller.client_app_id == "app-1"
    assert caller.subject == "alice"
    assert caller.issuer == idp().issuer
    assert caller.claims["region"] == ("emea", "amer")
    assert caller.claims["level"] == 3


def test_the_client_application_falls_back_to_client_id() -> None:
    """Without ``azp``, the ``client_id`` claim names the client application."""
    caller = _verifier().authenticate(idp().token(azp=None, client_id="app-2"))
    assert caller.client_app_id == "app-2"


def test_the_tenant_claim_name_is_configured_per_issuer() -> None:
    """An issuer configured with ``tenant_claim="org"`` reads the tenant from ``org``."""
    token = idp().token(esra_tenant=None, org="tenant-a")
    assert _verifier(tenant_claim="org").authenticate(token).tenant_id == "tenant-a"
    assert _refused(idp().token(), tenant_claim="org") is TokenRejection.MISSING_CLAIM


async def test_the_sdk_access_token_carries_the_caller() -> None:
    """verify_token returns a CallerToken: the typed caller, tenant claim and iss in claims."""
    token = idp().token()
    access = await _verifier().verify_token(token)
    assert isinstance(access, CallerToken)
    assert access.caller.tenant_id == "tenant-a"
    assert access.client_id == "app-1"
    assert access.subject == "alice"
    assert access.resource == AUDIENCE
    assert access.claims is not None
    assert access.claims["iss"] == idp().issuer
    assert access.claims["esra_tenant"] == "tenant-a"


async def test_a_refused_token_verifies_to_none() -> None:
    """verify_token answers None for a refused token (the SDK then answers 401)."""
    assert await _verifier().verify_token("garbage") is None


def _alg_none() -> str:
    header = {"alg": "none", "typ": "JWT"}
    return unsigned(header, idp().claims())


def _tampered_signature() -> str:
    head, body, signature = idp().token().split(".")
    flipped = "A" if signature[0] != "A" else "B"
    return f"{head}.{body}.{flipped}{signature[1:]}"


def _tampered_payload() -> str:
    head, _body, signature = idp().token().split(".")
    forged = idp().token(esra_tenant="tenant-b").split(".")[1]
    return f"{head}.{forged}.{signature}"


HOSTILE: dict[str, tuple[Any, TokenRejection]] = {
    "alg none": (_alg_none, TokenRejection.ALGORITHM_NOT_ALLOWED),
    "alg none, empty signature dropped": (
        lambda: _alg_none().rstrip("."),
        TokenRejection.MALFORMED,
    ),
    "HS256 keyed with the public key": (
        lambda: idp().hs256_with_public_key(),
        TokenRejection.ALGORITHM_NOT_ALLOWED,
    ),
    "unknown issuer": (
        lambda: idp().token(iss="https://evil.example/"),
        TokenRejection.UNKNOWN_ISSUER,
    ),
    "signed by one issuer, claiming another": (
        lambda: idp().token(iss=other_idp().issuer, esra_tenant="tenant-b"),
        TokenRejection.BAD_SIGNATURE,
    ),
    "no issuer": (lambda: idp().token(iss=None), TokenRejection.UNKNOWN_ISSUER),
    "wrong audience": (
        lambda: idp().token(aud="https://other.example/mcp"),
        TokenRejection.WRONG_AUDIENCE,
    ),
    "no audience": (lambda: idp().token(aud=None), TokenRejection.MISSING_CLAIM),
    "expired beyond the leeway": (
        lambda: idp().token(exp=int(NOW.timestamp()) - 61),
        TokenRejection.EXPIRED,
    ),
    "no expiry": (lambda: idp().token(exp=None), TokenRejection.MISSING_CLAIM),
    "not valid yet": (
        lambda: idp().token(nbf=int(NOW.timestamp()) + 120),
        TokenRejection.NOT_YET_VALID,
    ),
    "issued in the future": (
        lambda: idp().token(iat=int(NOW.timestamp()) + 120),
        TokenRejection.NOT_YET_VALID,
    ),
    "expiry that is not a number": (lambda: idp().token(exp="tomorrow"), TokenRejection.MALFORMED),
    "missing tenant claim": (lambda: idp().token(esra_tenant=None), TokenRejection.MISSING_CLAIM),
    "empty tenant claim": (lambda: idp().token(esra_tenant=""), TokenRejection.MISSING_CLAIM),
    "tenant claim that is not a string": (
        lambda: idp().token(esra_tenant=["tenant-a"]),
        TokenRejection.MISSING_CLAIM,
    ),
    "missing subject": (lambda: idp().token(sub=None), TokenRejection.MISSING_CLAIM),
    "missing client application": (lambda: idp().token(azp=None), TokenRejection.MISSING_CLAIM),
    # Blank names no one: a blank subject would be one caller, one quota and one audit
    # subject for every user of the issuer whose tokens carried it.
    "blank subject": (lambda: idp().token(sub=" \t"), TokenRejection.MISSING_CLAIM),
    "blank tenant claim": (lambda: idp().token(esra_tenant="\n "), TokenRejection.MISSING_CLAIM),
    "blank client application": (lambda: idp().token(azp="\u3000"), TokenRejection.MISSING_CLAIM),
    # A control character or a lone surrogate names no one either: kept, it reached the
    # caller key, the audit records and the quota table, which cannot all hold it.
    "subject with a NUL": (lambda: idp().token(sub="alice\x00"), TokenRejection.MISSING_CLAIM),
    "subject with a lone surrogate": (
        lambda: idp().token(sub="alice\ud800"),
        TokenRejection.MISSING_CLAIM,
    ),
    "tenant with a line break": (
        lambda: idp().token(esra_tenant="tenant-a\n"),
        TokenRejection.MISSING_CLAIM,
    ),
    "client application with an escape": (
        lambda: idp().token(azp="app\x1b[31m"),
        TokenRejection.MISSING_CLAIM,
    ),
    "tenant the issuer may not assert": (
        lambda: other_idp().token(esra_tenant="tenant-a"),
        TokenRejection.TENANT_NOT_TRUSTED,
    ),
    "unknown kid": (lambda: idp().token(headers={"kid": "rsa-9"}), TokenRejection.UNKNOWN_KEY),
    "kid of a key of another type": (
        lambda: idp().token("rsa-1", headers={"kid": "ec-1"}),
        TokenRejection.UNKNOWN_KEY,
    ),
    "kid that is not a string": (
        lambda: unsigned({"alg": "RS256", "kid": 7}, idp().claims(), b"sig"),
        TokenRejection.MALFORMED,
    ),
    "key of another issuer under a trusted kid": (
        lambda: TestIdp(idp().issuer).token("rsa-1"),
        TokenRejection.BAD_SIGNATURE,
    ),
    "tampered signature": (_tampered_signature, TokenRejection.BAD_SIGNATURE),
    "tampered payload": (_tampered_payload, TokenRejection.BAD_SIGNATURE),
    "garbage": (lambda: "not-a-jwt", TokenRejection.MALFORMED),
    "garbage in three parts": (lambda: "a.b.c", TokenRejection.MALFORMED),
    "payload that is not JSON": (
        lambda: f"{idp().token().split('.')[0]}.{b64url(b'[1,2')}.{b64url(b'x')}",
        TokenRejection.MALFORMED,
    ),
    "oversized": (lambda: "a" * (MAX_TOKEN_CHARS + 1), TokenRejection.TOO_LARGE),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_and_broken_tokens_are_refused(case: str) -> None:
    """Each hostile token is refused by the check named for it."""
    make, reason = HOSTILE[case]
    assert _refused(make()) is reason


def test_an_algorithm_the_issuer_does_not_allow_is_refused() -> None:
    """An ES256 token from an issuer trusted for RS256 only is refused, though its key exists."""
    assert _refused(idp().token("ec-1"), algorithms=("RS256",)) is (
        TokenRejection.ALGORITHM_NOT_ALLOWED
    )


def test_expiry_within_the_leeway_is_accepted_and_the_leeway_is_configurable() -> None:
    """A token expired 30 s ago passes a 60 s leeway and fails a 10 s one."""
    token = idp().token(exp=int(NOW.timestamp()) - 30)
    assert _verifier().authenticate(token).subject == "alice"
    assert _refused(token, leeway_s=10) is TokenRejection.EXPIRED


def test_a_token_without_kid_uses_the_only_fitting_key() -> None:
    """No kid: accepted when exactly one key fits the algorithm; refused when several do."""
    token = idp().token("ed-1", headers={"kid": None})
    assert _verifier().authenticate(token).subject == "alice"
    jwks = idp().jwks()
    twice = {"keys": [*jwks["keys"], {**jwks["keys"][2], "kid": "ed-2"}]}
    assert _refused(token, jwks=twice) is TokenRejection.UNKNOWN_KEY


def test_caller_claims_keep_policy_values_only() -> None:
    """Lists become tuples; objects, fractions, per-token and reserved esra.* claims drop."""
    claims = caller_claims(
        {
            "region": ["emea"],
            "team": "support",
            "level": 2,
            "admin": False,
            "nested": {"a": 1},
            "ratio": 0.5,
            "mixed": ["a", 1],
            "esra.tenant_id": "tenant-b",
            "exp": 1,
            "iat": 1,
            "nbf": 1,
            "jti": "x",
        }
    )
    assert claims == {"region": ("emea",), "team": "support", "level": 2, "admin": False}


def test_an_issuer_configured_twice_is_refused() -> None:
    """Two trusted issuers with the same iss would make key choice ambiguous."""
    with pytest.raises(ValueError, match="configured twice"):
        JwtVerifier([idp().trusted(), idp().trusted()])


def _counting_decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every signature verification the verifier makes."""
    calls: list[str] = []
    decode = auth_module._decode

    def counted(token: str, *args: Any) -> dict[str, Any]:
        calls.append(token)
        return decode(token, *args)

    monkeypatch.setattr(auth_module, "_decode", counted)
    return calls


def test_a_token_verified_once_is_not_verified_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_decodes(monkeypatch)
    verifier = _verifier()
    token = idp().token()
    first = verifier.authenticate(token)
    second = verifier.authenticate(token)
    assert first == second
    assert len(calls) == 1
    verifier.authenticate(idp().token(sub="someone-else"))  # another token: verified
    assert len(calls) == 2


def test_a_remembered_token_still_expires_on_time() -> None:
    clock = FakeClock(NOW)
    verifier = JwtVerifier([idp().trusted()], clock=clock)
    token = idp().token(exp=int(NOW.timestamp()) + 60)
    verifier.authenticate(token)
    clock.advance(61 + idp().trusted().leeway_s)
    with pytest.raises(TokenRejectedError) as refused:
        verifier.authenticate(token)
    assert refused.value.reason is TokenRejection.EXPIRED


def test_a_refused_token_is_never_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_decodes(monkeypatch)
    verifier = _verifier()
    forged = _tampered_signature()
    for _ in range(2):
        with pytest.raises(TokenRejectedError):
            verifier.authenticate(forged)
    assert len(calls) == 2  # checked, and refused, each time


def test_the_remembered_tokens_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth_module, "VERIFIED_TOKENS_KEPT", 2)
    calls = _counting_decodes(monkeypatch)
    verifier = _verifier()
    tokens = [idp().token(sub=f"user-{n}") for n in range(3)]
    for token in tokens:
        verifier.authenticate(token)
    verifier.authenticate(tokens[0])  # the least recently used was let go: verified again
    assert len(calls) == 4
