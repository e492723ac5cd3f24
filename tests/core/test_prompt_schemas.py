"""Each task's JSON Schema: strict-mode shaped, and never wider than the task's parser."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.core._prompts import contracts
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import (
    PromptTask,
    output_schema,
    output_schema_name,
    parse_answer,
    parse_plan,
    parse_rerank,
    parse_selection,
)

PARSERS: dict[PromptTask, Callable[[str], object]] = {
    PromptTask.SELECT_SOURCES: parse_selection,
    PromptTask.PLAN_SEARCHES: lambda text: parse_plan(text, source_id="s-1"),
    PromptTask.RERANK: parse_rerank,
    PromptTask.ANSWER: parse_answer,
}

# The keywords every strict structured-output mode accepts (see the schemas module).
_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items", "enum", "anyOf"}


def _nodes(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Return ``schema`` and every schema nested in it."""
    found = [schema]
    for child in (*schema.get("properties", {}).values(), *schema.get("anyOf", ())):
        found.extend(_nodes(child))
    if "items" in schema:
        found.extend(_nodes(schema["items"]))
    return found


def _documents(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Generate JSON documents the schema admits (arrays kept within every parser bound)."""
    if "anyOf" in schema:
        return st.one_of([_documents(s) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if isinstance(kind, list):
        return st.one_of([_documents({**schema, "type": k}) for k in kind])
    simple: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=30),
        "number": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
        "integer": st.integers(),
        "boolean": st.booleans(),
        "null": st.none(),
    }
    if kind == "object":
        return st.fixed_dictionaries({k: _documents(v) for k, v in schema["properties"].items()})
    if kind == "array":
        return st.lists(_documents(schema["items"]), min_size=1, max_size=4)
    return simple[kind]


@pytest.mark.parametrize("task", list(PromptTask))
def test_every_task_has_a_strict_mode_schema(task: PromptTask) -> None:
    """Objects list every property as required and forbid others; only portable keywords."""
    schema = output_schema(task)
    assert schema["type"] == "object"
    for node in _nodes(schema):
        assert set(node) <= _KEYWORDS
        if node.get("type") == "object":
            assert node["required"] == list(node["properties"])
            assert node["additionalProperties"] is False
    assert "$ref" not in json.dumps(schema)


def test_schema_names_are_distinct_vendor_safe_names() -> None:
    """Names fit OpenAI's json_schema and Anthropic's tool name rules."""
    names = [output_schema_name(task) for task in PromptTask]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in names)


def test_each_call_returns_a_fresh_schema() -> None:
    """A caller that edits a schema cannot change the next one."""
    first = output_schema(PromptTask.RERANK)
    first["properties"].clear()
    assert output_schema(PromptTask.RERANK)["properties"]


def test_the_schema_states_exactly_the_keys_the_parsers_accept() -> None:
    """Compared with the parsers' own whitelists, so the two cannot drift apart."""
    plan = output_schema(PromptTask.PLAN_SEARCHES)["properties"]["queries"]["items"]
    rerank = output_schema(PromptTask.RERANK)["properties"]["scores"]["items"]
    pairs = [
        (output_schema(PromptTask.SELECT_SOURCES), contracts._SELECTION_KEYS),
        (output_schema(PromptTask.PLAN_SEARCHES), contracts._PLAN_KEYS),
        (plan, contracts._QUERY_KEYS),
        (plan["properties"]["filters"]["items"], contracts._FILTER_KEYS),
        (output_schema(PromptTask.RERANK), contracts._RERANK_KEYS),
        (rerank, contracts._SCORE_KEYS),
        (output_schema(PromptTask.ANSWER), contracts._COMPOSED_KEYS),
    ]
    for schema, keys in pairs:
        assert set(schema["properties"]) == keys


@pytest.mark.parametrize("task", list(PromptTask))
@given(data=st.data())
def test_every_document_the_schema_admits_parses(task: PromptTask, data: st.DataObject) -> None:
    """A model held to the schema can only produce answers its task's parser accepts."""
    document = data.draw(_documents(output_schema(task)))
    PARSERS[task](json.dumps(document))


@pytest.mark.parametrize(
    ("task", "document"),
    [
        (PromptTask.PLAN_SEARCHES, {"queries": []}),
        (PromptTask.RERANK, {"scores": [{"id": f"r_{i}", "score": 0.5} for i in range(201)]}),
        (PromptTask.ANSWER, {"answer": "x" * 1201, "citations": []}),
        (PromptTask.SELECT_SOURCES, {"sources": [f"s-{i}" for i in range(101)]}),
    ],
)
def test_bounds_the_schema_leaves_out_are_still_enforced(
    task: PromptTask, document: dict[str, Any]
) -> None:
    """At least one query, array bounds and the answer's length stay the parser's job."""
    with pytest.raises(ModelOutputError):
        PARSERS[task](json.dumps(document))
