"""Which caller an explanation may name: only one a trusted issuer's token could make.

Explain promises that the search runs exactly as it would for the caller the operator
names. A caller no token could be would break that promise, and in the worst case run a
search no real call can:

- a claim under the core's reserved ``esra.`` prefix: hosts strip those from every token and
  the pipeline sets ``esra.tenant_id`` itself, so a policy requiring such a claim admits no
  real caller — it must not admit an explained one either;
- a claim naming the caller's tenant (the host's issuers' ``tenant_claim``, e.g.
  ``esra_tenant``) with another tenant's id: a real token's tenant claim always names the
  tenant it is served on, and a record filter bound to it would otherwise select another
  tenant's rows from this tenant's sources;
- a claim value holding control characters (NUL, line breaks, escapes) or lone surrogates,
  or an integer no database column holds: no policy or record filter is written for them,
  a driver would refuse or mangle them, and they would be echoed into the operator's view;
- a subject, client application, exposure or source id that is empty, overlong or not
  printable: they are written into the ``esra.explain`` record, which must hold only text
  a reader can trust.

The problem is described without echoing the hostile value.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from esra.core._context import CallerIdentity, ClaimValue

__all__ = [
    "MAX_CLAIMS",
    "MAX_CLAIM_CHARS",
    "MAX_NAME_CHARS",
    "MAX_SOURCES",
    "RESERVED_CLAIM_PREFIX",
    "caller_problem",
    "name_problem",
]

MAX_NAME_CHARS = 256
MAX_CLAIMS = 64
MAX_CLAIM_CHARS = 1024
MAX_SOURCES = 256
# The prefix a host strips from every token (and ``context_claims`` ignores), exactly as
# cased: ``ESRA.x`` reaches a real caller's claims, so an explained caller may hold it too.
RESERVED_CLAIM_PREFIX = "esra."
# What a database's BIGINT holds; a larger claim would overflow its parameter.
_MIN_INTEGER = -(2**63)
_MAX_INTEGER = 2**63 - 1


def name_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be the name ``what``, or ``None`` when it can."""
    if not value or len(value) > MAX_NAME_CHARS or not value.isprintable():
        return f"{what} must be a string of 1 to {MAX_NAME_CHARS} printable characters."
    return None


def _text_ok(value: str) -> bool:
    # isprintable() is False for NUL, every control character and every lone surrogate.
    return len(value) <= MAX_CLAIM_CHARS and value.isprintable()


def _value_ok(value: ClaimValue) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return _MIN_INTEGER <= value <= _MAX_INTEGER
    if isinstance(value, str):
        return _text_ok(value)
    return (
        isinstance(value, tuple)
        and len(value) <= MAX_CLAIMS
        and all(isinstance(item, str) and _text_ok(item) for item in value)
    )


def _claims_problem(
    claims: Mapping[str, ClaimValue], tenant_id: str, tenant_claims: Collection[str]
) -> str | None:
    if len(claims) > MAX_CLAIMS:
        return f"caller.claims may hold at most {MAX_CLAIMS} claims."
    for name, value in claims.items():
        if problem := name_problem(name, "A claim name"):
            return problem
        if name.startswith(RESERVED_CLAIM_PREFIX):
            return (
                f"caller.claims: {name} is under the reserved {RESERVED_CLAIM_PREFIX!r} prefix, "
                "which no caller's token carries."
            )
        if name in tenant_claims and value != tenant_id:
            return (
                f"caller.claims: {name} names the caller's tenant, which can only be the "
                "tenant explained on."
            )
        if not _value_ok(value):
            return (
                f"caller.claims: {name} must be a boolean, an integer of at most 64 bits, a "
                f"string of up to {MAX_CLAIM_CHARS} printable characters or a list of at "
                f"most {MAX_CLAIMS} such strings."
            )
    return None


def caller_problem(
    *,
    tenant_id: str,
    exposure: str,
    caller: CallerIdentity,
    client_app_id: str,
    authorized_source_ids: Collection[str] | None,
    tenant_claims: Collection[str],
) -> str | None:
    """Why no token could make the caller an explain request names, or ``None``.

    ``tenant_claims`` are the claim names the host's issuers carry the tenant in.
    """
    problem = (
        name_problem(exposure, "exposure")
        or name_problem(caller.subject, "caller.subject")
        or name_problem(client_app_id, "caller.clientApp")
        or _claims_problem(caller.claims, tenant_id, tenant_claims)
    )
    if problem is not None or authorized_source_ids is None:
        return problem
    if len(authorized_source_ids) > MAX_SOURCES:
        return f"authorizedSources may name at most {MAX_SOURCES} source ids."
    for source_id in authorized_source_ids:
        if problem := name_problem(source_id, "A source id"):
            return problem
    return None
