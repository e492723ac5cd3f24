"""``POST /explain``: run an invocation as a named caller and answer what the pipeline decided.

For operators holding ``ESRA_EXPOSURE_MANAGE`` on the acting tenant (the token's, or the one
``ESRA-Tenant`` names for a cross-tenant operator); anyone else gets 403 before the body is
read, and the refusal is recorded as ``esra.explain``. The body names the exposure, the
search arguments exactly as the MCP tool takes them (``prompt``, ``filters``) and the caller
to run as::

    {"exposure": "hr_search",
     "arguments": {"prompt": "parental leave", "filters": []},
     "caller": {"subject": "alice", "clientApp": "hr-portal",
                "claims": {"region": "emea", "groups": ["hr"]}},
     "authorizedSources": ["s-1"]}

``authorizedSources`` (optional) is the platform's runtime authorization to explain with.
The answer is the explanation (see ``esra.core._explain``) as JSON; it is never cached.

The claims named must be ones a token could carry to a policy: a claim this host drops from
every token (``caller_claims``: the per-token ``exp``/``iat``/``nbf``/``jti``, the reserved
``esra.`` names) is refused, as the core refuses any other caller no token could make.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from esra.core import CallerIdentity, ClaimValue, Explanation
from esra.core.admin import ExplainRequest, ExplainService, NotPermittedError
from esra.core.exceptions import ExposureNotFoundError, InvalidRequestError
from esra.starlette._admin.bodies import read_json_object
from esra.starlette._admin.errors import AdminError, AdminErrorCode
from esra.starlette._admin.operator import RoleClaims, acting_tenant_of, administrator_of
from esra.starlette._auth import caller_claims
from esra.starlette._schemas import parse_search_arguments

__all__ = ["ExplainApi", "explain_request_of", "explanation_view", "token_claims"]

_BODY_FIELDS = frozenset({"exposure", "arguments", "caller", "authorizedSources"})
_CALLER_FIELDS = frozenset({"subject", "clientApp", "claims"})
_MAX_NAME_CHARS = 256
_MAX_CLAIMS = 64
_MAX_CLAIM_CHARS = 1024
_MAX_SOURCES = 256


def _invalid(message: str) -> AdminError:
    return AdminError(AdminErrorCode.ESRA_INVALID_REQUEST, message)


def _name(value: object, what: str) -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > _MAX_NAME_CHARS
        or not value.isprintable()
    ):
        raise _invalid(f"{what} must be a string of 1 to {_MAX_NAME_CHARS} printable characters.")
    return value


def _claim(value: object) -> ClaimValue:
    if isinstance(value, bool | int) or (isinstance(value, str) and len(value) <= _MAX_CLAIM_CHARS):
        return value
    if (
        isinstance(value, list)
        and len(value) <= _MAX_CLAIMS
        and all(isinstance(v, str) and len(v) <= _MAX_CLAIM_CHARS for v in value)
    ):
        return tuple(value)
    raise _invalid(
        "Each claim must be a string, a number, a boolean or a list of strings "
        f"(strings up to {_MAX_CLAIM_CHARS} characters)."
    )


def token_claims(claims: Mapping[str, ClaimValue]) -> dict[str, ClaimValue]:
    """``claims``, once each is one this host passes on from a token (``caller_claims``).

    Raises:
        ValueError: naming the first claim a token's verification would drop.
    """
    # As a token's payload holds them: a list claim is a JSON array, not a tuple.
    kept = caller_claims({n: list(v) if isinstance(v, tuple) else v for n, v in claims.items()})
    dropped = sorted(name for name in claims if name not in kept)
    if dropped:
        msg = f"{dropped[0]} is dropped from every caller's token, so no caller holds it."
        raise ValueError(msg)
    return dict(claims)


def _claims(value: object) -> dict[str, ClaimValue]:
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > _MAX_CLAIMS:
        raise _invalid(f"caller.claims must be an object of at most {_MAX_CLAIMS} claims.")
    claims = {_name(name, "A claim name"): _claim(claim) for name, claim in value.items()}
    try:
        return token_claims(claims)
    except ValueError as exc:
        raise _invalid(f"caller.claims: {exc}") from None


def _caller(value: object) -> tuple[CallerIdentity, str]:
    if not isinstance(value, dict) or not set(value) <= _CALLER_FIELDS:
        raise _invalid("caller must be an object with subject, clientApp and optional claims.")
    subject = _name(value.get("subject"), "caller.subject")
    client_app = _name(value.get("clientApp"), "caller.clientApp")
    return CallerIdentity(subject=subject, claims=_claims(value.get("claims"))), client_app


def _sources(value: object) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > _MAX_SOURCES:
        raise _invalid(f"authorizedSources must be a list of at most {_MAX_SOURCES} source ids.")
    return frozenset(_name(source, "A source id") for source in value)


def explain_request_of(body: Mapping[str, Any]) -> ExplainRequest:
    """The explain request a body describes (the shape in the module docstring).

    Raises:
        AdminError: ``ESRA_INVALID_REQUEST`` naming the first problem found.
    """
    unknown = sorted(name for name in body if name not in _BODY_FIELDS)
    if unknown:
        raise _invalid(f"Unknown field; accepted: {', '.join(sorted(_BODY_FIELDS))}.")
    exposure = _name(body.get("exposure"), "exposure")
    try:
        arguments = parse_search_arguments(body.get("arguments"))
    except InvalidRequestError as exc:
        raise _invalid(f"arguments: {exc.public_message}") from None
    caller, client_app = _caller(body.get("caller"))
    return ExplainRequest(
        exposure=exposure,
        request=arguments.prompt,
        caller=caller,
        client_app_id=client_app,
        filters=arguments.filters,
        authorized_source_ids=_sources(body.get("authorizedSources")),
    )


def explanation_view(explanation: Explanation) -> dict[str, Any]:
    """The explanation as the API (and ``esra explain``) answers it."""
    return {
        "tenantId": explanation.tenant_id,
        "exposure": explanation.exposure,
        "correlationId": explanation.correlation_id,
        "status": explanation.status,
        "error": explanation.error,
        "decisions": [
            {
                "event": d.event,
                "outcome": d.outcome,
                "reason": d.reason,
                "dimensions": {
                    name: list(value) if isinstance(value, tuple) else value
                    for name, value in d.dimensions.items()
                },
            }
            for d in explanation.decisions
        ],
        "plans": [
            {
                "sourceId": p.source_id,
                "mappingId": p.mapping_id,
                "strategy": p.strategy,
                "requiredTerms": list(p.required_terms),
                "optionalTerms": list(p.optional_terms),
                "excludedTerms": list(p.excluded_terms),
                "phrases": list(p.phrases),
                "filters": list(p.filters),
                "limit": p.limit,
            }
            for p in explanation.plans
        ],
        "validation": [
            {
                "sourceId": v.source_id,
                "mappingId": v.mapping_id,
                "outcome": v.outcome,
                "reason": v.reason,
            }
            for v in explanation.validation
        ],
        "queries": [
            {
                "queryId": q.query_id,
                "sourceId": q.source_id,
                "mappingId": q.mapping_id,
                "strategy": q.strategy,
                "statement": (
                    {"text": q.statement.text, "parameters": list(q.statement.parameters)}
                    if q.statement is not None
                    else None
                ),
                "rows": q.rows,
                "failure": q.failure,
            }
            for q in explanation.queries
        ],
        "candidates": explanation.candidates,
        "ranking": [
            {
                "position": r.position,
                "resultId": r.result_id,
                "sourceId": r.source_id,
                "mappingId": r.mapping_id,
                "key": r.key,
                # A key no caller would see is a stand-in (``esra.core._explain``): say so.
                "keyWithheld": r.key_withheld,
                "normalized": r.normalized,
                "weighted": r.weighted,
                "bonus": r.bonus,
                "semantic": r.semantic,
                "final": r.final,
                "returned": r.returned,
            }
            for r in explanation.ranking
        ],
        "warnings": list(explanation.warnings),
        "stages": [{"stage": s.stage, "elapsedMs": s.elapsed_ms} for s in explanation.stages],
    }


class ExplainApi:
    """``/explain`` over the host's ``ExplainService``."""

    def __init__(self, service: ExplainService, *, role_claims: RoleClaims) -> None:
        self._service = service
        self._role_claims = role_claims

    def routes(self) -> list[Route]:
        """The endpoint, relative to the admin API's base path."""
        return [Route("/explain", self.explain, methods=["POST"])]

    async def explain(self, request: Request) -> Response:
        """POST /explain: the explanation of one invocation run as the named caller."""
        admin = administrator_of(request, self._role_claims)
        tenant_id = acting_tenant_of(request)
        try:
            await self._service.require(admin, tenant_id)
        except NotPermittedError:
            raise AdminError(
                AdminErrorCode.ESRA_FORBIDDEN, "Your roles do not permit this."
            ) from None
        explain_request = explain_request_of(await read_json_object(request))
        try:
            explanation = await self._service.explain(admin, tenant_id, explain_request)
        except ExposureNotFoundError:
            raise AdminError(
                AdminErrorCode.ESRA_NOT_FOUND, "This host serves no search for your tenant."
            ) from None
        except InvalidRequestError as exc:
            # The core's own words (never a value of the request): what to correct.
            raise _invalid(str(exc)) from None
        return JSONResponse(explanation_view(explanation), headers={"cache-control": "no-store"})
