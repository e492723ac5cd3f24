"""Each task's output contract as a JSON Schema, for vendors' structured-output modes.

A model adapter may hand this schema to a vendor (OpenAI ``response_format`` json_schema,
an Anthropic tool's ``input_schema``) so the model is constrained to the contract's shape.
The schema never replaces the contract: the prompt still carries the contract text, and the
core still parses every answer with the task's strict parser.

The schemas keep to the subset every strict structured-output mode accepts: every object
lists all its properties as required and forbids others, an optional value is nullable
rather than absent, and only ``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``enum`` and ``anyOf`` are used. What that subset cannot
state portably is left to the parsers, which enforce it on every answer: the array bounds
(``MAX_*`` in ``contracts``, and a selection's ``2 × candidates``), at least one planned
query, a score's 0..1 range (the parser clamps) and the answer's length. Numeric and length
keywords are left out on purpose: strict mode on several OpenAI-compatible servers rejects
them, which would turn every call into a refused request rather than a constrained answer.
"""

from __future__ import annotations

from typing import Any, assert_never

from esra.core._config.mapping import Operator
from esra.core._prompts.model import PromptTask
from esra.core._query import Strategy

__all__ = ["output_schema", "output_schema_name"]


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _strings() -> dict[str, Any]:
    return _array({"type": "string"})


def _scalars() -> list[dict[str, Any]]:
    return [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]


def _planned_query() -> dict[str, Any]:
    return _object(
        {
            "mapping": {"type": "string"},
            "strategy": {"type": "string", "enum": [s.value for s in Strategy]},
            "required_terms": _strings(),
            "optional_terms": _strings(),
            "excluded_terms": _strings(),
            "phrases": _strings(),
            "filters": _array(
                _object(
                    {
                        "field": {"type": "string"},
                        "operator": {"type": "string", "enum": [o.value for o in Operator]},
                        "value": {"anyOf": [*_scalars(), _array({"anyOf": _scalars()})]},
                    }
                )
            ),
            "fields": _strings(),
            # null asks for the mapping's default row limit (the parser accepts null too).
            "limit": {"type": ["integer", "null"]},
        }
    )


def output_schema(task: PromptTask) -> dict[str, Any]:
    """Return a fresh JSON Schema of ``task``'s output contract (see the module docstring).

    Every document the schema admits has only keys its task's parser accepts; the bounds the
    schema leaves out are still enforced by the parser.
    """
    if task is PromptTask.SELECT_SOURCES:
        return _object({"sources": _strings()})
    if task is PromptTask.PLAN_SEARCHES:
        return _object({"queries": _array(_planned_query())})
    if task is PromptTask.RERANK:
        return _object(
            {"scores": _array(_object({"id": {"type": "string"}, "score": {"type": "number"}}))}
        )
    if task is PromptTask.ANSWER:
        return _object({"answer": {"type": "string"}, "citations": _strings()})
    assert_never(task)


def output_schema_name(task: PromptTask) -> str:
    """Return the name a vendor shows for ``task``'s schema or tool (``[a-z_]``, ≤ 64)."""
    return f"esra_{task.value}"
