"""Output contracts for each task, and the strict parsers that read a model's answer.

A model answer is untrusted: the parsers accept only the documented JSON shape (optionally in
a Markdown code fence) — its keys and nothing more, every array within its bound — and raise
``ModelOutputError`` on anything else, so the calling stage falls back deterministically.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from esra.core._query import FilterValue, PlannedFilter, PlannedQuery, Scalar
from esra.core.exceptions import ModelOutputError

__all__ = [
    "ANSWER_CONTRACT",
    "MAX_ANSWER_CHARS",
    "MAX_ANSWER_CITATIONS",
    "MAX_ANSWER_TEXT_CHARS",
    "MAX_LIST_ITEMS",
    "MAX_PLAN_QUERIES",
    "MAX_RERANK_SCORES",
    "MAX_SELECTION_IDS",
    "PLAN_CONTRACT",
    "RERANK_CONTRACT",
    "SELECTION_CONTRACT",
    "AnswerDraft",
    "parse_answer",
    "parse_plan",
    "parse_rerank",
    "parse_selection",
]

MAX_ANSWER_CHARS = 200_000
"""Cap on a model's raw reply to any task, before it is parsed."""
# Output whitelists: an answer carries only its contract's keys, and no array is longer than
# its bound. Anything else is a ModelOutputError, so the stage falls back with its warning —
# an injected instruction that makes a model pad, extend or reshape its answer fails closed.
MAX_SELECTION_IDS = 100
"""Fixed cap on a selection answer's ids when the caller does not pass the candidate count."""
MAX_PLAN_QUERIES = 20
MAX_RERANK_SCORES = 200
MAX_LIST_ITEMS = 50
"""Cap on every list inside a planned query: each term list, phrases, fields, filters and a
filter's value list."""
MAX_ANSWER_TEXT_CHARS = 1_200
"""Cap on a composed answer's text: an answer is a short summary, the results carry detail."""
MAX_ANSWER_CITATIONS = 20

_SELECTION_KEYS = frozenset({"sources"})
_PLAN_KEYS = frozenset({"queries"})
_QUERY_KEYS = frozenset(
    {
        "mapping",
        "strategy",
        "required_terms",
        "optional_terms",
        "excluded_terms",
        "phrases",
        "filters",
        "fields",
        "limit",
    }
)
_FILTER_KEYS = frozenset({"field", "operator", "value"})
_RERANK_KEYS = frozenset({"scores"})
_SCORE_KEYS = frozenset({"id", "score"})
_COMPOSED_KEYS = frozenset({"answer", "citations"})

SELECTION_CONTRACT = (
    "Answer with one JSON object and nothing else: "
    '{"sources": ["<source id>", ...]} listing the ids of the sources worth searching, '
    "possibly none."
)

PLAN_CONTRACT = (
    "Answer with one JSON object and nothing else: "
    '{"queries": [{"mapping": "<mapping id>", "strategy": "<strategy>", '
    '"required_terms": [], "optional_terms": [], "excluded_terms": [], "phrases": [], '
    '"filters": [{"field": "<fieldName>", "operator": "<operator>", "value": <value>}], '
    '"fields": ["<returnable fieldName>"], "limit": <rows>}]} '
    "with between 1 and {max_queries} queries."
)

RERANK_CONTRACT = (
    "Answer with one JSON object and nothing else: "
    '{"scores": [{"id": "<result id>", "score": <0.0 to 1.0>}]} '
    "with one entry for every result."
)

ANSWER_CONTRACT = (
    "Answer with one JSON object and nothing else: "
    '{"answer": "<a short answer citing results inline as [<result id>]>", '
    '"citations": ["<result id>", ...]} '
    f"where the answer is at most {MAX_ANSWER_TEXT_CHARS} characters and the citations, at "
    f"most {MAX_ANSWER_CITATIONS}, are ids of results given above. When the results do not "
    'answer the request, answer {"answer": "", "citations": []}.'
)

_FENCE = "```"


def _only_keys(value: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    if not value.keys() <= allowed:
        # The unknown keys are not quoted: they are model output and may carry anything.
        msg = f"{what} has keys outside its output contract"
        raise ModelOutputError(msg)


def _bounded(value: list[Any], bound: int, what: str) -> list[Any]:
    if len(value) > bound:
        msg = f"{what} has more than {bound} entries"
        raise ModelOutputError(msg)
    return value


def _unfenced(text: str) -> str:
    """``text`` stripped, and without the Markdown code fence (```` ``` ```` or
    ```` ```json ````) around it, if any.

    String operations, not a regular expression: a pattern that looks for whitespace before
    and after a lazily matched body tries every split of a whitespace run, and an answer of
    a fence and 200,000 spaces would hold the event loop for hours.
    """
    body = text.strip()
    if len(body) < 2 * len(_FENCE) or not (body.startswith(_FENCE) and body.endswith(_FENCE)):
        return body
    inner = body[len(_FENCE) : -len(_FENCE)]
    return inner.removeprefix("json").strip()


def _load_object(text: str, allowed: frozenset[str]) -> dict[str, Any]:
    if len(text) > MAX_ANSWER_CHARS:
        msg = "model answer too long"
        raise ModelOutputError(msg)
    body = _unfenced(text)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:
        # ValueError, not only JSONDecodeError: an integer past Python's int-string limit
        # (4,300 digits) raises a plain ValueError, and it is outside the contract all the same.
        msg = "model answer is not JSON"
        raise ModelOutputError(msg) from exc
    if not isinstance(value, dict):
        msg = "model answer is not a JSON object"
        raise ModelOutputError(msg)
    _only_keys(value, allowed, "model answer")
    return value


def _string_list(value: Any, what: str, bound: int = MAX_LIST_ITEMS) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        msg = f"{what} must be a list of strings"
        raise ModelOutputError(msg)
    return tuple(_bounded(value, bound, what))


def parse_selection(text: str, *, candidates: int | None = None) -> tuple[str, ...]:
    """Return the source ids a selection answer names, in order, without duplicates.

    The answer may hold at most ``2 × candidates`` ids (``MAX_SELECTION_IDS`` when the count
    is not given); a longer list, or any key but ``sources``, is a ModelOutputError.
    """
    bound = MAX_SELECTION_IDS if candidates is None else 2 * max(candidates, 0)
    ids = _string_list(_load_object(text, _SELECTION_KEYS).get("sources"), "sources", bound)
    return tuple(dict.fromkeys(ids))


def _scalar(value: Any) -> Scalar:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    msg = "filter values must be strings, numbers or booleans"
    raise ModelOutputError(msg)


def _filter_value(value: Any) -> FilterValue:
    if isinstance(value, list):
        return tuple(_scalar(v) for v in _bounded(value, MAX_LIST_ITEMS, "a filter value"))
    return _scalar(value)


def _planned_filter(raw: Any) -> PlannedFilter:
    if not isinstance(raw, dict):
        msg = "each filter must be an object"
        raise ModelOutputError(msg)
    _only_keys(raw, _FILTER_KEYS, "a filter")
    field, operator = raw.get("field"), raw.get("operator")
    if not isinstance(field, str) or not isinstance(operator, str) or "value" not in raw:
        msg = "a filter needs field, operator and value"
        raise ModelOutputError(msg)
    return PlannedFilter(field=field, operator=operator, value=_filter_value(raw["value"]))


def parse_plan(text: str, *, source_id: str) -> tuple[PlannedQuery, ...]:
    """Return the planned queries of a planning answer for ``source_id`` (still unvalidated).

    At most ``MAX_PLAN_QUERIES`` queries; each query and filter carries only its contract's
    keys, and every list inside a query holds at most ``MAX_LIST_ITEMS`` entries.
    """
    raw_queries = _load_object(text, _PLAN_KEYS).get("queries")
    if not isinstance(raw_queries, list) or not raw_queries:
        msg = "queries must be a non-empty list"
        raise ModelOutputError(msg)
    planned = []
    for raw in _bounded(raw_queries, MAX_PLAN_QUERIES, "queries"):
        if not isinstance(raw, dict):
            msg = "each query must be an object"
            raise ModelOutputError(msg)
        _only_keys(raw, _QUERY_KEYS, "a query")
        mapping, strategy, limit = raw.get("mapping"), raw.get("strategy"), raw.get("limit")
        if not isinstance(mapping, str) or not isinstance(strategy, str):
            msg = "a query needs a mapping and a strategy"
            raise ModelOutputError(msg)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            msg = "limit must be an integer"
            raise ModelOutputError(msg)
        raw_filters = raw.get("filters") or []
        if not isinstance(raw_filters, list):
            msg = "filters must be a list"
            raise ModelOutputError(msg)
        planned.append(
            PlannedQuery(
                source_id=source_id,
                mapping_id=mapping,
                strategy=strategy,
                required_terms=_string_list(raw.get("required_terms"), "required_terms"),
                optional_terms=_string_list(raw.get("optional_terms"), "optional_terms"),
                excluded_terms=_string_list(raw.get("excluded_terms"), "excluded_terms"),
                phrases=_string_list(raw.get("phrases"), "phrases"),
                filters=tuple(
                    _planned_filter(f) for f in _bounded(raw_filters, MAX_LIST_ITEMS, "filters")
                ),
                fields=_string_list(raw.get("fields"), "fields"),
                limit=limit,
            )
        )
    return tuple(planned)


def parse_rerank(text: str) -> dict[str, float]:
    """Return ``{result id: score}`` from a rerank answer; scores are clamped into 0..1.

    At most ``MAX_RERANK_SCORES`` entries, each with exactly ``id`` and ``score``.

    The caller checks the ids against the ones it issued; an id seen twice keeps its first
    score.
    """
    raw_scores = _load_object(text, _RERANK_KEYS).get("scores")
    if not isinstance(raw_scores, list):
        msg = "scores must be a list"
        raise ModelOutputError(msg)
    scores: dict[str, float] = {}
    for raw in _bounded(raw_scores, MAX_RERANK_SCORES, "scores"):
        if not isinstance(raw, dict):
            msg = "each score must be an object"
            raise ModelOutputError(msg)
        _only_keys(raw, _SCORE_KEYS, "a score")
        result_id, score = raw.get("id"), raw.get("score")
        if not isinstance(result_id, str) or isinstance(score, bool):
            msg = "a score needs a string id and a numeric score"
            raise ModelOutputError(msg)
        if not isinstance(score, int | float):
            msg = "a score must be a finite number"
            raise ModelOutputError(msg)
        try:
            # An integer of hundreds of digits is valid JSON and too large for a float.
            value = float(score)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            msg = "a score must be a finite number"
            raise ModelOutputError(msg)
        scores.setdefault(result_id, min(1.0, max(0.0, value)))
    return scores


@attrs.frozen
class AnswerDraft:
    """A composed answer exactly as the model gave it: citations unchecked, text unsanitized."""

    text: str
    citations: tuple[str, ...]


def parse_answer(text: str) -> AnswerDraft:
    """Return the text and the cited result ids of an answer-task reply, as given.

    The reply holds ``answer`` (a string of at most ``MAX_ANSWER_TEXT_CHARS``) and
    ``citations`` (at most ``MAX_ANSWER_CITATIONS`` strings) and nothing else; anything else
    is a ModelOutputError. The caller checks the ids against the ones it offered.
    """
    raw = _load_object(text, _COMPOSED_KEYS)
    answer = raw.get("answer")
    if not isinstance(answer, str):
        msg = "answer must be a string"
        raise ModelOutputError(msg)
    if len(answer) > MAX_ANSWER_TEXT_CHARS:
        msg = f"answer is longer than {MAX_ANSWER_TEXT_CHARS} characters"
        raise ModelOutputError(msg)
    citations = _string_list(raw.get("citations"), "citations", MAX_ANSWER_CITATIONS)
    return AnswerDraft(text=answer, citations=citations)
