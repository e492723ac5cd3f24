"""Answer composition (authorization layer 6): a short answer that cites the returned results.

Runs after ``respond()``, so the output order is field allowlist → masking → size cap →
citation validation → error sanitization. It runs only when the effective scope allows the
``answer`` response mode, and the model sees the request and exactly what the caller gets of
each returned result whose source permits answers (allowlisted, masked, size-capped), tagged
with its opaque result id. A result of any other source is returned but never shown to the
model and never citable.

The model's reply is untrusted: the contract parser rejects anything outside its whitelist,
citation validation keeps only the ids the model was given (from the citation list and from
the text), and the text is sanitized. Whenever no valid citation is left, or the model fails,
the answer is withheld with ``ESRA_ANSWER_WITHHELD``; the results are returned either way.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Collection, Sequence

import attrs

from esra.core._audit.record import AuditDimension
from esra.core._config.capability import ResponseMode
from esra.core._context import InvocationContext
from esra.core._pipeline.invocation import AuditTrail
from esra.core._pipeline.rerank import RESULT_ID_PREFIX, RankedCandidate
from esra.core._pipeline.respond import sanitize_text, sanitize_warnings
from esra.core._pipeline.scope import EffectiveScope, ScopedInvocation
from esra.core._prompts.builders import AnswerItem, build_answer_prompt
from esra.core._prompts.contracts import MAX_ANSWER_TEXT_CHARS, AnswerDraft, parse_answer
from esra.core._prompts.markers import strip_markers
from esra.core._prompts.model import datamark_for
from esra.core._response import (
    Answer,
    ResponseStatus,
    ResponseWarning,
    ResultItem,
    RetrievalResponse,
)
from esra.core._text_normalisation import FoldedText, fold_char
from esra.core.codes import AuditEvent, WarningCode
from esra.core.exceptions import ModelOutputError
from esra.core.ports import LanguageModel

__all__ = [
    "CitedText",
    "answerable_results",
    "compose_answer",
    "sanitize_answer_text",
    "validate_citations",
]

_log = logging.getLogger(__name__)

_UNAVAILABLE = "Answer generation was unavailable; the results are returned without an answer."
_UNCITED = (
    "No answer citing the returned results could be composed; "
    "the results are returned without an answer."
)

# Anything shaped like a result id and not inside a word, in brackets or not: an id the model
# was not given must not survive anywhere in the text. It is looked for in the folded text
# (esra.core._text_normalisation), with any letter or digit after the prefix, so an id written
# with look-alike letters (Cyrillic А, fullwidth ｒ＿) is id-shaped too; only the original
# characters of a match are cut, and only an offered id written exactly as given is kept. (A
# word such as "r_squared" is taken for an id too; in a short answer that costs a word, while a
# missed forged id would cost a false citation.)
_RESULT_ID = re.compile(rf"(?<![^\W_]){re.escape(RESULT_ID_PREFIX)}[\w-]+")
# What removing ids can leave behind: separators inside brackets, then empty brackets, then a
# space before punctuation.
_AFTER_OPEN = re.compile(r"([\[(])[\s,;]+")
_BEFORE_CLOSE = re.compile(r"[\s,;]+([\])])")
_EMPTY_BRACKETS = re.compile(r"\[\]|\(\)")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:!?])")
# Format characters (zero-width and bidirectional controls) and unpaired surrogates.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cs"})


@attrs.frozen
class CitedText:
    """An answer after citation validation.

    ``citations`` are the valid ids, listed ones first, then ones only cited inline, each once;
    ``rejected`` counts the distinct ids the model cited or wrote that it was not given.
    """

    text: str
    citations: tuple[str, ...]
    rejected: int


def answerable_results(
    response: RetrievalResponse,
    ranked: Sequence[RankedCandidate],
    scope: EffectiveScope,
) -> tuple[ResultItem, ...]:
    """Return the returned results whose source permits answers, in response order."""
    source_of = {r.result_id: r.candidate.source_id for r in ranked}
    permitting = {s.source.id for s in scope.sources if s.source.answer_permitted}
    return tuple(item for item in response.results if source_of.get(item.result_id) in permitting)


def _tidy(text: str) -> str:
    text = _AFTER_OPEN.sub(r"\1", text)
    text = _BEFORE_CLOSE.sub(r"\1", text)
    text = _EMPTY_BRACKETS.sub("", text)
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text)


def validate_citations(draft: AnswerDraft, offered: Collection[str]) -> CitedText:
    """Keep only citations of ``offered`` ids, in the citation list and in the text.

    An id-shaped token in the text that was not offered is removed (with what it leaves
    behind, such as empty brackets); an offered id cited only in the text becomes a citation.
    """
    known = frozenset(offered)
    rejected: set[str] = set()
    inline: list[str] = []
    text = draft.text
    while True:
        text, removed = _remove_foreign_ids(text, known, inline, rejected)
        if not removed:
            break
        # Tidying drops what the removal left (empty brackets): look again, since that can
        # join the text either side into a new id-shaped token.
        text = _tidy(text)
        inline.clear()
    listed = [c for c in draft.citations if c in known]
    rejected.update(c for c in draft.citations if c not in known)
    return CitedText(
        text=text, citations=tuple(dict.fromkeys([*listed, *inline])), rejected=len(rejected)
    )


def _remove_foreign_ids(
    text: str, known: frozenset[str], inline: list[str], rejected: set[str]
) -> tuple[str, bool]:
    """Cut every id-shaped token of ``text`` that is not a ``known`` id as written.

    Kept ids are appended to ``inline`` and cut tokens (as written) added to ``rejected``;
    returns the text and whether anything was cut.
    """
    folded = FoldedText(text)
    kept: list[str] = []
    last = 0
    for match in _RESULT_ID.finditer(folded.folded):
        start, end = folded.original_span(match.start(), match.end())
        # Characters that fold to nothing right after the token (a combining mark) go with it.
        while end < len(text) and not fold_char(text[end]):
            end += 1
        token = text[start:end]
        if token in known:
            inline.append(token)
            continue
        rejected.add(token)
        kept.append(text[last:start])
        last = end
    if not kept:
        return text, False
    kept.append(text[last:])
    return "".join(kept), True


def sanitize_answer_text(text: str, *, datamark: str | None) -> str:
    """Return ``text`` fit for a caller: visible characters only, whitespace collapsed, capped.

    Removes the datamark (a model quoting marked reference data would otherwise hand it to the
    caller), invisible format characters (zero-width and bidirectional controls, which can
    hide or reorder text), marker tokens and control characters.
    """
    if datamark is not None:
        text = text.replace(datamark, " ")
    # Cs: an unpaired surrogate, which JSON can spell ("\ud800") and no UTF-8 response can
    # carry — it would fail the whole response, not only the answer.
    visible = "".join(c for c in text if unicodedata.category(c) not in _INVISIBLE_CATEGORIES)
    return sanitize_text(strip_markers(visible), MAX_ANSWER_TEXT_CHARS)


def _withheld(response: RetrievalResponse, message: str) -> RetrievalResponse:
    warning = ResponseWarning(WarningCode.ESRA_ANSWER_WITHHELD, message)
    return attrs.evolve(
        response,
        status=ResponseStatus.DEGRADED,
        warnings=sanitize_warnings((*response.warnings, warning)),
        answer=None,
    )


async def compose_answer(
    invocation: ScopedInvocation,
    request: str,
    response: RetrievalResponse,
    ranked: Sequence[RankedCandidate],
    *,
    model: LanguageModel,
) -> RetrievalResponse:
    """Return ``response`` with a cited answer, or without one and why.

    Without the ``answer`` mode in ``scope.response_modes`` the response is returned unchanged,
    unaudited, and the model is not asked. Without a returned result from a source that
    permits answers (an empty result set included) the model is not asked either; the skip is
    audited. Otherwise the model answers from those results only; the answer is kept when a
    citation of one of them survives validation and its sanitized text is not empty, and is
    otherwise withheld with ``ESRA_ANSWER_WITHHELD`` (status ``degraded``). ``ranked`` is what
    ``respond()`` chose from: it says which source each result came from.
    """
    ctx, scope = invocation.ctx, invocation.scope
    if ResponseMode.ANSWER not in scope.response_modes:
        return response
    offered = answerable_results(response, ranked, scope)
    record = _Recorder(ctx, invocation.audit, offered=len(offered))
    if not offered:
        cause = "no_answer_permitted_results" if response.results else "no_results"
        record.compose("skipped", cause=cause)
        return response
    datamark = datamark_for(scope.capability.datamark_untrusted)
    prompt = build_answer_prompt(
        request,
        [
            AnswerItem(
                result_id=item.result_id,
                source_name=item.source,
                title=item.title,
                fragment=item.fragment,
                fields=item.fields,
            )
            for item in offered
        ],
        model_profile=scope.capability.model_profile,
        datamark=datamark,
    )
    try:
        draft = parse_answer(await model.complete(prompt))
    except Exception as exc:
        # The exception text may quote the model or the prompt: only its type is logged.
        _log.warning(
            "answer model call failed (%s) in invocation %s",
            type(exc).__name__,
            ctx.correlation_id,
        )
        outside = isinstance(exc, ModelOutputError)
        record.compose(
            "withheld", cause="reply_outside_contract" if outside else "model_unavailable"
        )
        return _withheld(response, _UNAVAILABLE)
    # Characters that could hide an id from validation are removed before it, so sanitizing
    # can never assemble an id that escaped it; what runs after only drops and collapses.
    visible = AnswerDraft(sanitize_answer_text(draft.text, datamark=datamark), draft.citations)
    cited = validate_citations(visible, [item.result_id for item in offered])
    text = sanitize_text(cited.text, MAX_ANSWER_TEXT_CHARS)
    if cited.rejected:
        record.unknown_results(cited.rejected)
    if not cited.citations or not text:
        record.compose(
            "withheld",
            cause="no_valid_citation" if text else "empty_answer",
            cited=len(cited.citations),
            rejected=cited.rejected,
        )
        return _withheld(response, _UNCITED)
    record.compose(
        "ok", cited=len(cited.citations), rejected=cited.rejected, answer_chars=len(text)
    )
    return attrs.evolve(response, answer=Answer(text=text, citations=cited.citations))


@attrs.frozen
class _Recorder:
    """Notes the answer stage's decisions: outcomes and counts only, never answer text or
    claim values."""

    ctx: InvocationContext
    audit: AuditTrail
    offered: int

    def compose(
        self,
        outcome: str,
        *,
        cause: str | None = None,
        cited: int = 0,
        rejected: int = 0,
        answer_chars: int = 0,
    ) -> None:
        dimensions: dict[str, AuditDimension] = {
            "exposure": self.ctx.exposure_slug,
            "client_app": self.ctx.client_app_id,
            "offered_count": self.offered,
            "cited_count": cited,
            "rejected_citation_count": rejected,
            "answer_chars": answer_chars,
        }
        if cause is not None:
            dimensions["cause"] = cause
        self.audit.note(
            AuditEvent.ANSWER_COMPOSE,
            outcome=outcome,
            reason=WarningCode.ESRA_ANSWER_WITHHELD.value if outcome == "withheld" else None,
            dimensions=dimensions,
        )

    def unknown_results(self, count: int) -> None:
        # The rejected ids are model text and are never recorded, only counted.
        self.audit.note(
            AuditEvent.LLM_UNKNOWN_RESULT_REJECTED,
            outcome="rejected",
            dimensions={
                "exposure": self.ctx.exposure_slug,
                "client_app": self.ctx.client_app_id,
                "stage": "answer",
                "count": count,
            },
        )
