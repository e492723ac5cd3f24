"""Stage 7 — rerank: a model judges relevance, ESRA computes and owns the final order.

The model sees opaque per-invocation ids, source names, masked titles and masked bounded
fragments only — never record keys, restricted fields or provider scores, which would anchor
it to the lexical ranking. Its answer is validated against the ids actually sent; anything
else is ignored and counted, and any failure falls back to the weighted (lexical) order —
a model call that overruns its time budget included, so a slow model costs the rerank, not
the whole invocation.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
from collections.abc import Mapping as AbcMapping
from collections.abc import Sequence

import attrs

from esra.core._config.capability import RerankWeights
from esra.core._config.mapping import Mapping
from esra.core._fragments import content_text, make_fragment
from esra.core._masking import masked_values
from esra.core._pipeline.aggregation import Candidate
from esra.core._prompts.builders import RerankItem, build_rerank_prompt
from esra.core._prompts.contracts import MAX_RERANK_SCORES, parse_rerank
from esra.core._prompts.markers import strip_markers
from esra.core._query import RowValue
from esra.core._response import ResponseWarning
from esra.core.codes import WarningCode
from esra.core.ports import LanguageModel

__all__ = [
    "RESULT_ID_PREFIX",
    "RankedCandidate",
    "RerankOutcome",
    "issue_result_id",
    "issue_result_ids",
    "record_item",
    "rerank",
    "rerank_item",
    "round_robin",
]

_LOG = logging.getLogger(__name__)

RESULT_ID_PREFIX = "r_"
# 72 random bits per result id: 12 URL-safe characters after the prefix.
_ID_BYTES = 9
_TITLE_CHARS = 200
_FALLBACK = ResponseWarning(
    WarningCode.ESRA_RERANK_FALLBACK,
    "Relevance reranking was unavailable; results are ordered by search score.",
)


@attrs.frozen
class RankedCandidate:
    """A candidate with its opaque result id, the model's score (if any) and its final score."""

    candidate: Candidate
    result_id: str
    semantic: float | None
    final: float
    # The content fragment the rerank showed the model (exposure's fragment size, masked,
    # marker-free), or None when the candidate was not sent: the response shows the same
    # fragment, so it is not cut from the whole content a second time.
    fragment: str | None = None


@attrs.frozen
class RerankOutcome:
    """Every candidate in final order, any warning, and how many unknown ids the model sent."""

    ranked: tuple[RankedCandidate, ...]
    warnings: tuple[ResponseWarning, ...] = ()
    unknown_ids: int = 0


def issue_result_id() -> str:
    """Return a fresh opaque result id: unguessable and meaningless outside this invocation."""
    return RESULT_ID_PREFIX + secrets.token_urlsafe(_ID_BYTES)


def issue_result_ids(count: int) -> list[str]:
    """Return ``count`` distinct fresh result ids, as ``issue_result_id`` makes them.

    One read of the system's random source serves them all (an invocation issues one per
    candidate, dozens at a time); a repeat, which 72 random bits make all but impossible,
    is drawn again.
    """
    pool = secrets.token_bytes(_ID_BYTES * count)
    ids: list[str] = []
    issued: set[str] = set()
    for start in range(0, len(pool), _ID_BYTES):
        drawn = pool[start : start + _ID_BYTES]
        result_id = RESULT_ID_PREFIX + base64.urlsafe_b64encode(drawn).decode("ascii")
        while result_id in issued:
            result_id = issue_result_id()
        issued.add(result_id)
        ids.append(result_id)
    return ids


def _lexical_key(candidate: Candidate) -> tuple[float, str, str, str]:
    return (-candidate.weighted, candidate.source_id, candidate.mapping.id, candidate.key)


def round_robin(candidates: Sequence[Candidate], limit: int) -> list[Candidate]:
    """Take up to ``limit`` candidates, one per source in turn, each source best-first.

    Sources take turns in the order of their best candidate, so a prolific source cannot crowd
    out a small source's strong matches: the counts taken from any two sources differ by at
    most one unless one of them ran out.
    """
    if limit <= 0:
        return []
    queues: dict[str, list[Candidate]] = {}
    for candidate in sorted(candidates, key=_lexical_key):
        queues.setdefault(candidate.source_id, []).append(candidate)
    taken: list[Candidate] = []
    depth = 0
    while len(taken) < limit:
        progressed = False
        for queue in queues.values():
            if depth < len(queue):
                taken.append(queue[depth])
                progressed = True
                if len(taken) == limit:
                    return taken
        if not progressed:
            break
        depth += 1
    return taken


def _shown_values(mapping: Mapping, values: AbcMapping[str, RowValue]) -> dict[str, RowValue]:
    # Only the title and content fields, and only if the mapping allows returning them: the
    # rest of the row (record key, restricted fields) must never reach the model.
    shown: dict[str, RowValue] = {}
    for name in (mapping.title_field, *mapping.content_fields):
        spec = mapping.field(name)
        if spec is not None and spec.is_returnable and not spec.is_restricted:
            shown[name] = values.get(name)
    return shown


def _item(
    mapping: Mapping,
    values: AbcMapping[str, RowValue],
    terms: Sequence[str],
    result_id: str,
    *,
    fragment_chars: int,
    source_name: str,
) -> RerankItem:
    texts = masked_values(_shown_values(mapping, values), mapping)
    title = make_fragment(texts.get(mapping.title_field, ""), (), _TITLE_CHARS)
    fragment = make_fragment(content_text(texts, mapping), terms, fragment_chars)
    return RerankItem(
        result_id=result_id,
        source_name=strip_markers(source_name),
        title=title,
        fragments=(fragment,) if fragment else (),
    )


def rerank_item(
    candidate: Candidate, result_id: str, *, fragment_chars: int, source_name: str
) -> RerankItem:
    """Return what the model may see of ``candidate``: masked, bounded, marker-free text."""
    return _item(
        candidate.mapping,
        candidate.values,
        candidate.matched_terms,
        result_id,
        fragment_chars=fragment_chars,
        source_name=source_name,
    )


def record_item(
    mapping: Mapping,
    values: AbcMapping[str, RowValue],
    *,
    fragment_chars: int,
    source_name: str = "",
    result_id: str = "",
) -> RerankItem:
    """Return what a rerank prompt would show of a record: for warming a model's caches.

    ``values`` are the record's field values by field name. The same allowlist, masking and
    bounds apply as in every rerank, with no matched term: a content that fits in
    ``fragment_chars`` (the exposure's) is shown whole, exactly as any invocation finding the
    record shows it; a longer one is cut around the first term a search matched, so only an
    invocation matching none of its terms (or one near its start) shows this same excerpt.
    """
    return _item(
        mapping, values, (), result_id, fragment_chars=fragment_chars, source_name=source_name
    )


def _place(candidate: Candidate) -> tuple[str, str]:
    return (candidate.source_id, candidate.mapping.id)


def _source_labels(
    sent: Sequence[Candidate], source_names: AbcMapping[str, str]
) -> dict[tuple[str, str], str]:
    """Name where each candidate comes from: the source, and its mapping when it has several.

    A source searched through two mappings (products and their reviews) gives two kinds of
    record whose search scores were normalised separately; the mapping's business name tells
    the model which kind it is reading, as the planning prompt already told it.
    """
    mappings: dict[str, set[str]] = {}
    for candidate in sent:
        mappings.setdefault(candidate.source_id, set()).add(candidate.mapping.id)
    labels: dict[tuple[str, str], str] = {}
    for candidate in sent:
        name = source_names.get(candidate.source_id, candidate.source_id)
        if len(mappings[candidate.source_id]) > 1:
            name = f"{name}: {candidate.mapping.business_name}"
        labels[_place(candidate)] = name
    return labels


def _lexical(
    ordered: Sequence[tuple[Candidate, str]],
    warnings: tuple[ResponseWarning, ...],
    unknown: int,
    fragments: AbcMapping[str, str] | None = None,
) -> RerankOutcome:
    shown = fragments or {}
    ranked = tuple(
        RankedCandidate(
            candidate=c, result_id=rid, semantic=None, final=c.weighted, fragment=shown.get(rid)
        )
        for c, rid in ordered
    )
    return RerankOutcome(ranked=ranked, warnings=warnings, unknown_ids=unknown)


async def rerank(
    request: str,
    candidates: Sequence[Candidate],
    *,
    model: LanguageModel,
    weights: RerankWeights,
    max_candidates: int,
    fragment_chars: int,
    source_names: AbcMapping[str, str],
    model_profile: str,
    datamark: str | None = None,
    timeout_s: float | None = None,
) -> RerankOutcome:
    """Rerank ``candidates`` with the model and return them in ESRA's final order.

    ``final = weights.semantic × semantic + weights.lexical × weighted``. A candidate the model
    omitted (or that was not sent) keeps ``semantic=None``, ``final = weights.lexical ×
    weighted``, and ranks below every scored candidate. A failing model, an unparseable answer
    or an answer with no known id falls back to the weighted order with
    ``ESRA_RERANK_FALLBACK``. ``max_candidates <= 0`` disables reranking (weighted order, no
    model call, no warning). ``datamark`` turns on datamarking of the prompt's reference data.

    ``timeout_s`` bounds the model call (``None``: no bound of its own). A call still running
    when it passes is cancelled and the weighted order returned with ``ESRA_RERANK_FALLBACK``;
    at zero or below the model is not asked at all, with the same fallback.
    """
    if not candidates:
        return RerankOutcome(ranked=())
    by_weight = sorted(candidates, key=_lexical_key)
    ordered = list(zip(by_weight, issue_result_ids(len(by_weight)), strict=True))
    id_of = {id(c): rid for c, rid in ordered}
    # Never more than the rerank contract accepts, so a complete answer always parses.
    sent = round_robin([c for c, _ in ordered], min(max_candidates, MAX_RERANK_SCORES))
    if not sent:
        return _lexical(ordered, (), 0)
    labels = _source_labels(sent, source_names)
    items = [
        rerank_item(c, id_of[id(c)], fragment_chars=fragment_chars, source_name=labels[_place(c)])
        for c in sent
    ]
    fragments = {item.result_id: "".join(item.fragments) for item in items}
    if timeout_s is not None and timeout_s <= 0:
        _LOG.warning("no time left for the rerank model call; using weighted order")
        return _lexical(ordered, (_FALLBACK,), 0, fragments)
    budget = asyncio.timeout(timeout_s)
    try:
        prompt = build_rerank_prompt(request, items, model_profile=model_profile, datamark=datamark)
        async with budget:
            answer = await model.complete(prompt)
        scores = parse_rerank(answer)
    except Exception as exc:
        if budget.expired():
            _LOG.warning(
                "rerank model call overran its %.3f s budget; using weighted order", timeout_s
            )
        else:
            # The exception text may quote the model or the prompt: only its type is logged.
            _LOG.warning("rerank model call failed (%s); using weighted order", type(exc).__name__)
        return _lexical(ordered, (_FALLBACK,), 0, fragments)
    known = {rid: score for rid, score in scores.items() if rid in fragments}
    unknown = len(scores) - len(known)
    if not known:
        return _lexical(ordered, (_FALLBACK,), unknown, fragments)
    ranked = []
    for candidate, result_id in ordered:
        semantic = known.get(result_id)
        final = weights.lexical * candidate.weighted
        if semantic is not None:
            final += weights.semantic * semantic
        ranked.append(
            RankedCandidate(candidate, result_id, semantic, final, fragments.get(result_id))
        )
    # Never keyed on the result id, which is random: the order depends on the scores alone.
    ranked.sort(
        key=lambda r: (r.semantic is None, -r.final, *_lexical_key(r.candidate)),
    )
    return RerankOutcome(ranked=tuple(ranked), warnings=(), unknown_ids=unknown)
