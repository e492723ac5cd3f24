"""A claim with no value admits nothing, and a token's times are finite numbers.

Found by a hostile review of the caller's authentication: an access policy's required claim
was satisfied by ``""`` or ``[]`` (what identity providers send for an unset attribute or no
groups), and an ``exp`` of NaN or Infinity (PyJWT's JSON accepts both) never expired.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.types import CallToolResult

from esra.core.testing import FakeClock
from esra.starlette._auth import JwtVerifier, TokenRejectedError
from tests.starlette._tokens import NOW, idp
from tests.starlette._world import mcp_client, open_world

UNKNOWN_TOOL = "ESRA_EXPOSURE_NOT_FOUND: No such tool."


def _text(result: CallToolResult) -> str:
    first = result.content[0]
    assert first.type == "text"
    return first.text


# --- A required claim with no value ---------------------------------------------------------
#
# Tenant A's ``payroll`` exposure requires the ``department`` claim. A token whose IdP emits
# the claim with no value (``""`` or ``[]`` — what many IdPs send for an unset attribute or
# an empty group list) was admitted exactly like a caller holding a department, although the
# same empty value is "missing" everywhere else a claim gates access (record filters and
# templates fail closed on empty claims, docs/security.md "Fail closed").


@pytest.mark.parametrize("empty", ["", []], ids=["empty-string", "empty-list"])
async def test_an_empty_required_claim_does_not_admit_the_caller(empty: Any) -> None:
    async with (
        open_world() as world,
        mcp_client(world.app, idp().token(department=empty)) as client,
    ):
        names = [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("esra_payroll", {"prompt": "leave"})
    assert "esra_payroll" not in names
    assert (result.is_error, _text(result)) == (True, UNKNOWN_TOOL)


# --- A time claim that is not a finite number -----------------------------------------------
#
# ``_check_times`` compares floats: ``now > nan + leeway`` and ``now > inf + leeway`` are both
# False, so a token whose ``exp`` was NaN or Infinity (PyJWT's json accepts the non-standard
# ``NaN``/``Infinity`` literals and ``1e999``) was valid for ever — also from the verified-token
# cache. (Precondition: a trusted issuer signed such a value.) Refused as MALFORMED now.


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": float("nan")},
        {"exp": float("inf")},
        {"exp": 10**400},
        {"nbf": float("nan")},
    ],
    ids=["exp-nan", "exp-inf", "exp-past-float", "nbf-nan"],
)
def test_a_non_finite_time_claim_is_refused(claims: dict[str, Any]) -> None:
    clock = FakeClock(NOW)
    verifier = JwtVerifier([idp().trusted()], clock=clock)
    token = idp().token(**claims)
    clock.advance(100 * 365 * 86400)  # a century later, the token must not still open
    with pytest.raises(TokenRejectedError):
        verifier.authenticate(token)
