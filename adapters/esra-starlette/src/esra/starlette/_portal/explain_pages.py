"""``/explain``: an operator runs one search as a named caller and reads its decisions.

For a visitor holding ``ESRA_EXPOSURE_MANAGE`` on the tenant they act on; anyone else gets a
403 page, and the refusal is recorded as ``esra.explain`` like the admin API's. The form
(CSRF-checked) names the exposure, the question, and the caller: subject, client
application and claims, one ``NAME=VALUE`` a line (a name on several lines is a list). The
form is read into the admin API's request body and checked by the admin API's own
``explain_request_of``, so both front doors of the one service refuse the same values (a
subject with a line break, a control character or 300 characters never reaches the audit
record). The answer page shows the explanation (``esra.core._explain``) as tables: stage
times, the decisions in order (the scope funnel, selection, rejections, answer gating),
every plan, each validation verdict, each statement with its parameter names and rows, and
the final order with its scores. Nothing on it is ever sent to a model or to an MCP client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from esra.core import Explanation
from esra.core.admin import ExplainRequest, ExplainService, NotPermittedError
from esra.core.exceptions import ExposureNotFoundError, InvalidRequestError
from esra.starlette._admin.errors import AdminError
from esra.starlette._admin.explain_api import explain_request_of
from esra.starlette._claim_pairs import MalformedClaimError, parse_claim_pairs
from esra.starlette._portal.access import Access, forbidden
from esra.starlette._portal.errors import PortalError
from esra.starlette._portal.layout import callout, page
from esra.starlette._portal.markup import Markup, html, join
from esra.starlette._portal.paths import base_path
from esra.starlette._portal.session import Visitor

__all__ = ["ExplainPages"]

_BACK = (("/explain", "Explain another search"),)
_MAX_FIELD_CHARS = 4_000


def _text(form: FormData, name: str, label: str, *, required: bool = True) -> str:
    value = form.get(name)
    text = value.strip() if isinstance(value, str) else ""
    if required and not text:
        raise PortalError(400, "Not explained", f"{label} is required.", links=_BACK)
    if len(text) > _MAX_FIELD_CHARS:
        raise PortalError(
            400,
            "Not explained",
            f"{label} is too long: at most {_MAX_FIELD_CHARS} characters.",
            links=_BACK,
        )
    return text


def _claims(text: str) -> dict[str, str | list[str]]:
    """The claims, as the admin API's body names them (a repeated name is a list)."""
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        pairs = parse_claim_pairs(lines, strip_values=True)
    except MalformedClaimError:
        raise PortalError(
            400, "Not explained", "Write each claim as NAME=VALUE on its own line.", links=_BACK
        ) from None
    return {name: value if isinstance(value, str) else list(value) for name, value in pairs.items()}


def _explain_request(form: FormData) -> ExplainRequest:
    """The form's request, checked exactly as ``POST /admin/v1/explain`` checks its body."""
    body: dict[str, Any] = {
        "exposure": _text(form, "exposure", "The exposure"),
        "arguments": {"prompt": _text(form, "question", "The question")},
        "caller": {
            "subject": _text(form, "subject", "The caller subject"),
            "clientApp": _text(form, "client_app", "The client application"),
            "claims": _claims(_text(form, "claims", "Claims", required=False)),
        },
    }
    try:
        return explain_request_of(body)
    except AdminError as refused:
        raise PortalError(400, "Not explained", refused.message, links=_BACK) from None


def _form(base: str, visitor: Visitor, values: Mapping[str, str]) -> Markup:
    return html(
        '<form method="post" action="{base}/explain" class="stack">'
        '<input type="hidden" name="csrf" value="{csrf}">'
        '<p><label for="exposure">Exposure (tool slug)</label> '
        '<input type="text" id="exposure" name="exposure" value="{exposure}" required></p>'
        '<p><label for="question">Question</label><br>'
        '<textarea id="question" name="question" rows="3" cols="60" required>{question}'
        "</textarea></p>"
        '<p><label for="subject">Caller subject</label> '
        '<input type="text" id="subject" name="subject" value="{subject}" required></p>'
        '<p><label for="client_app">Client application</label> '
        '<input type="text" id="client_app" name="client_app" value="{client_app}" required></p>'
        '<p><label for="claims">Claims, one NAME=VALUE a line</label><br>'
        '<textarea id="claims" name="claims" rows="4" cols="60">{claims}</textarea></p>'
        '<p><button type="submit">Explain</button></p></form>',
        base=base,
        csrf=visitor.csrf,
        exposure=values.get("exposure", ""),
        question=values.get("question", ""),
        subject=values.get("subject", ""),
        client_app=values.get("client_app", ""),
        claims=values.get("claims", ""),
    )


def _table(caption: str, headers: tuple[str, ...], rows: Sequence[tuple[object, ...]]) -> Markup:
    if not rows:
        return html("<h2>{}</h2><p>None.</p>", caption)
    head = join(html('<th scope="col">{}</th>', h) for h in headers)
    body = join(
        html("<tr>{}</tr>", join(html("<td>{}</td>", cell) for cell in row)) for row in rows
    )
    return html(
        "<h2>{}</h2><table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>",
        caption,
        head,
        body,
    )


def _dimensions(values: Mapping[str, object]) -> str:
    return "; ".join(f"{name}={value}" for name, value in values.items())


def _explanation(explanation: Explanation) -> Markup:
    summary = callout(
        f"Status {explanation.status}"
        + (f", error {explanation.error}" if explanation.error else "")
        + (f"; warnings: {', '.join(explanation.warnings)}" if explanation.warnings else "")
        + f". Correlation id {explanation.correlation_id}.",
        kind="error" if explanation.error else "ok",
        role="status",
    )
    statements = [
        (
            q.query_id,
            q.source_id,
            q.mapping_id,
            q.strategy,
            html("<pre>{}</pre>", q.statement.text) if q.statement else "not rendered",
            ", ".join(q.statement.parameters) if q.statement else "",
            "-" if q.rows is None else q.rows,
            q.failure or "",
        )
        for q in explanation.queries
    ]
    return join(
        [
            summary,
            _table(
                "Stages",
                ("Stage", "Milliseconds"),
                [(s.stage, f"{s.elapsed_ms:.3f}") for s in explanation.stages],
            ),
            _table(
                "Decisions",
                ("Event", "Outcome", "Reason", "Details"),
                [
                    (d.event, d.outcome, d.reason or "", _dimensions(d.dimensions))
                    for d in explanation.decisions
                ],
            ),
            _table(
                "Plans",
                ("Source", "Mapping", "Strategy", "Required", "Optional", "Excluded", "Phrases"),
                [
                    (
                        p.source_id,
                        p.mapping_id,
                        p.strategy,
                        ", ".join(p.required_terms),
                        ", ".join(p.optional_terms),
                        ", ".join(p.excluded_terms),
                        " | ".join(p.phrases),
                    )
                    for p in explanation.plans
                ],
            ),
            _table(
                "Validation",
                ("Source", "Mapping", "Verdict", "Reason"),
                [
                    (v.source_id, v.mapping_id, v.outcome, v.reason or "")
                    for v in explanation.validation
                ],
            ),
            _table(
                "Statements",
                (
                    "Query",
                    "Source",
                    "Mapping",
                    "Strategy",
                    "Statement",
                    "Parameters",
                    "Rows",
                    "Failure",
                ),
                statements,
            ),
            _table(
                f"Final order ({explanation.candidates} candidates)",
                (
                    "#",
                    "Source",
                    "Key",
                    "Normalised",
                    "Weighted",
                    "Bonus",
                    "Semantic",
                    "Final",
                    "Returned",
                ),
                [
                    (
                        r.position,
                        r.source_id,
                        r.key,
                        f"{r.normalized:.3f}",
                        f"{r.weighted:.3f}",
                        f"{r.bonus:.3f}",
                        "-" if r.semantic is None else f"{r.semantic:.3f}",
                        f"{r.final:.3f}",
                        "yes" if r.returned else "no (size cap)",
                    )
                    for r in explanation.ranking
                ],
            ),
        ]
    )


class ExplainPages:
    """``/explain``: the form (GET) and the explanation (POST, CSRF-checked)."""

    def __init__(self, access: Access, service: ExplainService) -> None:
        self._access = access
        self._service = service

    def routes(self) -> list[Route]:
        """The routes, relative to the portal's mount path."""
        return [
            Route("/explain", self.form, methods=["GET"]),
            Route("/explain", self.explain, methods=["POST"]),
        ]

    async def _operator(self, request: Request) -> Visitor:
        visitor = self._access.sessions.visitor(request)
        try:
            await self._service.require(visitor.administrator, visitor.operator.tenant_id)
        except NotPermittedError:
            raise forbidden("Explaining a search") from None
        return visitor

    async def form(self, request: Request) -> Response:
        """GET /explain: the form naming the exposure, the question and the caller."""
        visitor = await self._operator(request)
        return page(
            request,
            title="Explain a search",
            content=_form(base_path(request), visitor, {}),
            visitor=visitor,
            current="/explain",
        )

    async def explain(self, request: Request) -> Response:
        """POST /explain: run the search as the named caller; the form again, then the tables."""
        visitor = await self._operator(request)
        form = await self._access.form(request, visitor)
        values = {
            name: value if isinstance(value := form.get(name), str) else ""
            for name in ("exposure", "question", "subject", "client_app", "claims")
        }
        explain_request = _explain_request(form)
        tenant_id = visitor.operator.tenant_id
        try:
            explanation = await self._service.explain(
                visitor.administrator, tenant_id, explain_request
            )
        except ExposureNotFoundError:
            raise PortalError(
                404, "Not explained", f"This host serves no search for tenant {tenant_id}."
            ) from None
        except InvalidRequestError as exc:
            raise PortalError(400, "Not explained", str(exc), links=_BACK) from None
        return page(
            request,
            title="Explain a search",
            content=join([_form(base_path(request), visitor, values), _explanation(explanation)]),
            visitor=visitor,
            current="/explain",
        )
