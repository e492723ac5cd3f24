"""Stage 3 — plan searches: one model call per selected source, concurrently.

Each source is planned on its own so one source's failure or terminology never reaches
another's. A source whose planning fails gets its mappings' default templates instead.
Each source's planning is an ``esra.planning.source`` span under the planning stage's,
naming the source, how many queries it planned and whether it fell back — never the
prompt or the model's answer.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection
from collections.abc import Mapping as MappingABC

import attrs

from esra.core._context import InvocationContext
from esra.core._pipeline.scope import EffectiveScope, ScopedInvocation, ScopedSource
from esra.core._pipeline.selection import Selection
from esra.core._prompts.builders import build_planning_prompt
from esra.core._prompts.contracts import parse_plan
from esra.core._prompts.model import datamark_for
from esra.core._query import PlannedQuery, Strategy
from esra.core._response import ResponseWarning
from esra.core._telemetry import stage_span
from esra.core.codes import WarningCode
from esra.core.ports import LanguageModel, ProviderCapabilities

__all__ = [
    "MAX_TEMPLATE_TERMS",
    "STOPWORDS",
    "PlanningOutcome",
    "default_template_queries",
    "plan_searches",
    "term_room",
]

_log = logging.getLogger(__name__)

# The template's own bound on terms per keyword query (the policy's may be lower); words past
# it are spread over further keyword queries, never dropped.
MAX_TEMPLATE_TERMS = 48

# Common English function words: they match nearly every record, so a keyword query over them
# only adds noise.
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own please same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
find show give list tell search get
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

# Word characters only: this drops statement separators, comment sequences, quotes, '#' and
# control characters by construction, so the template's terms always pass validation.
_WORD = re.compile(r"\w+")


@attrs.frozen
class PlanningOutcome:
    """The planned (still unvalidated) queries in selection order, and planning's warnings."""

    queries: tuple[PlannedQuery, ...]
    warnings: tuple[ResponseWarning, ...] = ()


async def plan_searches(
    invocation: ScopedInvocation,
    selection: Selection,
    request: str,
    *,
    model: LanguageModel,
    capabilities: MappingABC[str, ProviderCapabilities],
) -> PlanningOutcome:
    """Plan every selected source with its own, concurrent model call.

    A source whose call fails, whose answer breaks the output contract, or whose provider
    capabilities are unknown is planned from its default templates instead, with an
    ``ESRA_PLANNING_FALLBACK`` warning naming it; the other sources keep their model plans.
    Queries come out in selection order, then in the order the model (or template) gave them.
    """
    ctx, scope = invocation.ctx, invocation.scope
    plans = await asyncio.gather(
        *(
            _plan_source(ctx, scoped, request, scope=scope, model=model, capabilities=capabilities)
            for scoped in selection.sources
        )
    )
    queries: list[PlannedQuery] = []
    warnings: list[ResponseWarning] = []
    for planned, warning in plans:
        queries.extend(planned)
        if warning is not None:
            warnings.append(warning)
    return PlanningOutcome(queries=tuple(queries), warnings=tuple(warnings))


async def _plan_source(
    ctx: InvocationContext,
    scoped: ScopedSource,
    request: str,
    *,
    scope: EffectiveScope,
    model: LanguageModel,
    capabilities: MappingABC[str, ProviderCapabilities],
) -> tuple[tuple[PlannedQuery, ...], ResponseWarning | None]:
    """Plan one source inside its own span (the fallback is counted with the invocation's
    warnings, in ``esra.fallbacks``: the span only says it happened)."""
    with stage_span(
        "planning.source", ctx, attributes={"esra.source.id": scoped.source.id}
    ) as span:
        planned, warning = await _planned_queries(
            ctx, scoped, request, scope=scope, model=model, capabilities=capabilities
        )
        span.set_attributes(
            {"esra.queries.planned": len(planned), "esra.planning.fallback": warning is not None}
        )
    return planned, warning


async def _planned_queries(
    ctx: InvocationContext,
    scoped: ScopedSource,
    request: str,
    *,
    scope: EffectiveScope,
    model: LanguageModel,
    capabilities: MappingABC[str, ProviderCapabilities],
) -> tuple[tuple[PlannedQuery, ...], ResponseWarning | None]:
    source = scoped.source
    stated = capabilities.get(source.id)
    room = term_room(scope.limits.max_terms_per_query, stated)
    if stated is not None:
        prompt = build_planning_prompt(
            request,
            source,
            scoped.mappings,
            stated,
            max_queries=source.max_queries_per_source,
            model_profile=scope.capability.model_profile,
            max_terms_per_query=room,
            datamark=datamark_for(scope.capability.datamark_untrusted),
        )
        try:
            return parse_plan(await model.complete(prompt), source_id=source.id), None
        except Exception:
            # The cause goes to the log only (asyncio.CancelledError is not an Exception and
            # still propagates, so a deadline cancels planning cleanly).
            _log.warning(
                "search planning failed for a source in invocation %s",
                ctx.correlation_id,
                exc_info=True,
            )
    fallback = default_template_queries(
        request,
        scoped,
        scope.limits.max_term_chars,
        max_terms=min(MAX_TEMPLATE_TERMS, room),
        strategies=stated.strategies if stated is not None else None,
    )
    # Keep the template's row limit within policy so the fallback itself validates.
    row_cap = min(scope.limits.max_rows_per_query, stated.max_rows if stated else 10**9)
    fallback = tuple(
        attrs.evolve(q, limit=min(q.limit, row_cap)) if q.limit is not None else q for q in fallback
    )
    warning = ResponseWarning(
        WarningCode.ESRA_PLANNING_FALLBACK,
        f"Search planning for source '{source.name}' was unavailable; "
        "a default search was used instead.",
    )
    return fallback, warning


def term_room(policy: int, stated: ProviderCapabilities | None) -> int:
    """The most terms a planned query to a source may carry: the policy's bound, lowered to
    the provider's ``max_scored_terms`` when that is smaller, so a plan written to the bound it
    is told is never refused for a limit it was not told of."""
    if stated is None or stated.max_scored_terms is None:
        return policy
    return min(policy, stated.max_scored_terms)


def default_template_queries(
    request: str,
    scoped: ScopedSource,
    max_term_chars: int,
    *,
    max_terms: int = MAX_TEMPLATE_TERMS,
    strategies: Collection[Strategy] | None = None,
) -> tuple[PlannedQuery, ...]:
    """Return the source's default-template queries for ``request``.

    Per mapping: KEYWORD queries whose optional terms are the request's content words
    (lowercased, stopwords removed, deduplicated, each at most ``max_term_chars``), at most
    ``max_terms`` per query — a request with more content words gets further keyword queries,
    so no word is dropped — and a PHRASE query over the request's words, truncated to
    ``max_term_chars`` on a word boundary. Row limit and fields come from the mapping's
    default template. Strategies outside ``strategies`` (when given) are left out.

    The keyword queries of every mapping come before the phrase queries, so truncation to the
    source's ``max_queries_per_source`` covers every mapping's words first and keeps the
    queries most likely to match (a whole-prompt phrase rarely occurs verbatim).
    """
    words = _WORD.findall(request)
    phrase = _phrase(words, max_term_chars)
    terms = _content_terms(words, max_term_chars)
    step = max(1, max_terms)
    chunks = [terms[start : start + step] for start in range(0, len(terms), step)]
    allowed = frozenset(Strategy) if strategies is None else frozenset(strategies)
    source_id = scoped.source.id
    keyword: list[PlannedQuery] = []
    phrases: list[PlannedQuery] = []
    for mapping in scoped.mappings:
        template = mapping.default_template
        if Strategy.KEYWORD in allowed:
            keyword.extend(
                PlannedQuery(
                    source_id=source_id,
                    mapping_id=mapping.id,
                    strategy=Strategy.KEYWORD.value,
                    optional_terms=chunk,
                    fields=template.fields,
                    limit=template.limit,
                )
                for chunk in chunks
            )
        if phrase and Strategy.PHRASE in allowed:
            phrases.append(
                PlannedQuery(
                    source_id=source_id,
                    mapping_id=mapping.id,
                    strategy=Strategy.PHRASE.value,
                    phrases=(phrase,),
                    fields=template.fields,
                    limit=template.limit,
                )
            )
    return tuple([*keyword, *phrases][: scoped.source.max_queries_per_source])


def _phrase(words: list[str], max_chars: int) -> str:
    """Join ``words`` with single spaces, cut on a word boundary to at most ``max_chars``."""
    if max_chars <= 0:
        return ""
    kept: list[str] = []
    length = 0
    for word in words:
        extra = len(word) + (1 if kept else 0)
        if length + extra > max_chars:
            break
        kept.append(word)
        length += extra
    if not kept and words:
        # A single word longer than the cap: its prefix is the best phrase left.
        return words[0][:max_chars]
    return " ".join(kept)


def _content_terms(words: list[str], max_chars: int) -> tuple[str, ...]:
    terms: dict[str, None] = {}
    for word in words:
        term = word.lower()
        # One-letter tokens are mostly contraction debris ("what's" → "what", "s").
        if term in STOPWORDS or len(term) > max_chars or (len(term) < 2 and not term.isdigit()):
            continue
        terms.setdefault(term, None)
    return tuple(terms)
