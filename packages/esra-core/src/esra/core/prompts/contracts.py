"""Output contracts for each task, and the strict parsers that read a model's answer.

A model answer is untrusted: the parsers accept only the documented JSON shape (optionally in
a Markdown code fence) and raise ``ModelOutputError`` on anything else, so the calling stage
falls back deterministically.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from esra.core.exceptions import ModelOutputError
from esra.core.query import FilterValue, PlannedFilter, PlannedQuery, Scalar

__all__ = [
    "MAX_ANSWER_CHARS",
    "PLAN_CONTRACT",
    "RERANK_CONTRACT",
    "SELECTION_CONTRACT",
    "parse_plan",
    "parse_rerank",
    "parse_selection",
]

MAX_ANSWER_CHARS = 200_000

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

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def _load_object(text: str) -> dict[str, Any]:
    if len(text) > MAX_ANSWER_CHARS:
        msg = "model answer too long"
        raise ModelOutputError(msg)
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = "model answer is not JSON"
        raise ModelOutputError(msg) from exc
    if not isinstance(value, dict):
        msg = "model answer is not a JSON object"
        raise ModelOutputError(msg)
    return value


def _string_list(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        msg = f"{what} must be a list of strings"
        raise ModelOutputError(msg)
    return tuple(value)


def parse_selection(text: str) -> tuple[str, ...]:
    """Return the source ids a selection answer names, in order, without duplicates."""
    ids = _string_list(_load_object(text).get("sources"), "sources")
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
        return tuple(_scalar(v) for v in value)
    return _scalar(value)


def _planned_filter(raw: Any) -> PlannedFilter:
    if not isinstance(raw, dict):
        msg = "each filter must be an object"
        raise ModelOutputError(msg)
    field, operator = raw.get("field"), raw.get("operator")
    if not isinstance(field, str) or not isinstance(operator, str) or "value" not in raw:
        msg = "a filter needs field, operator and value"
        raise ModelOutputError(msg)
    return PlannedFilter(field=field, operator=operator, value=_filter_value(raw["value"]))


def parse_plan(text: str, *, source_id: str) -> tuple[PlannedQuery, ...]:
    """Return the planned queries of a planning answer for ``source_id`` (still unvalidated)."""
    raw_queries = _load_object(text).get("queries")
    if not isinstance(raw_queries, list) or not raw_queries:
        msg = "queries must be a non-empty list"
        raise ModelOutputError(msg)
    planned = []
    for raw in raw_queries:
        if not isinstance(raw, dict):
            msg = "each query must be an object"
            raise ModelOutputError(msg)
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
                filters=tuple(_planned_filter(f) for f in raw_filters),
                fields=_string_list(raw.get("fields"), "fields"),
                limit=limit,
            )
        )
    return tuple(planned)


def parse_rerank(text: str) -> dict[str, float]:
    """Return ``{result id: score}`` from a rerank answer; scores are clamped into 0..1.

    The caller checks the ids against the ones it issued; an id seen twice keeps its first
    score.
    """
    raw_scores = _load_object(text).get("scores")
    if not isinstance(raw_scores, list):
        msg = "scores must be a list"
        raise ModelOutputError(msg)
    scores: dict[str, float] = {}
    for raw in raw_scores:
        if not isinstance(raw, dict):
            msg = "each score must be an object"
            raise ModelOutputError(msg)
        result_id, score = raw.get("id"), raw.get("score")
        if not isinstance(result_id, str) or isinstance(score, bool):
            msg = "a score needs a string id and a numeric score"
            raise ModelOutputError(msg)
        if not isinstance(score, int | float) or not math.isfinite(score):
            msg = "a score must be a finite number"
            raise ModelOutputError(msg)
        scores.setdefault(result_id, min(1.0, max(0.0, float(score))))
    return scores
