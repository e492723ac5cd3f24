"""Issue 13, item 12: every tool schema speaks one dialect model clients read.

The MCP Inspector's ``--strict`` mode warned five times about an array-valued ``type``
(``["string", "null"]`` on ``documentRef``, ``totalChars`` and ``nextOffset``, and
``["string", "number", "boolean"]`` twice in the filter values). Every schema of every tool —
input and output, search and fetch, for callers with different scopes — is walked here: no
array-valued ``type`` and no ``const`` anywhere, and each is a valid JSON Schema 2020-12.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp.types import Tool

from esra.starlette._devtoken import load_or_create_dev_issuer
from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT
from esra.starlette._host import build_app
from esra.starlette._parts import open_embedded
from esra.starlette._schemas import (
    FETCH_INPUT_SCHEMA,
    FETCH_OUTPUT_SCHEMA,
    SEARCH_OUTPUT_SCHEMA,
    search_input_schema,
)
from tests.starlette._tokens import idp
from tests.starlette._world import mcp_client, open_world

# The validator the mcp client itself uses; it ships without type hints, hence the import.
jsonschema: Any = importlib.import_module("jsonschema")
# A dev token's claim value.
Claim = str | tuple[str, ...]

CALLERS: tuple[Mapping[str, Claim], ...] = (
    {},
    {"region": "emea"},
    {"region": ("emea", "amer"), "document_scopes": ("public",)},
)


def _subschemas(node: object, path: str = "$") -> Iterator[tuple[str, object]]:
    """Every value in ``node``, with its JSON path."""
    yield path, node
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _subschemas(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _subschemas(value, f"{path}[{index}]")


def _dialect_problems(schema: Mapping[str, Any]) -> list[str]:
    problems = []
    for path, node in _subschemas(schema):
        if not isinstance(node, Mapping):
            continue
        if isinstance(node.get("type"), list):
            problems.append(f"{path}: array-valued type {node['type']}")
        if "const" in node and not path.endswith(".properties"):
            problems.append(f"{path}: const")
    return problems


def _check(tool: Tool) -> None:
    for schema in (tool.input_schema, tool.output_schema):
        assert schema is not None, tool.name
        assert _dialect_problems(schema) == [], tool.name
        jsonschema.Draft202012Validator.check_schema(schema)


async def _embedded_tools(data_dir: Path, claims: Mapping[str, Claim]) -> list[Tool]:
    token = load_or_create_dev_issuer(data_dir).mint(
        tenant=EMBEDDED_TENANT,
        subject="alice",
        client_app=EMBEDDED_CLIENT_APP,
        now=datetime.now(UTC),
        claims=dict(claims),
        lifetime_s=600,
    )
    async with open_embedded(data_dir) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000)
        async with app.router.lifespan_context(app), mcp_client(app, token) as client:
            return list((await client.list_tools()).tools)


def test_the_fixed_schemas_had_the_five_array_valued_types_removed() -> None:
    """The module's own schemas, and the search input with and without filterable fields."""
    for schema in (FETCH_INPUT_SCHEMA, FETCH_OUTPUT_SCHEMA, SEARCH_OUTPUT_SCHEMA):
        assert _dialect_problems(schema) == []
        jsonschema.Draft202012Validator.check_schema(schema)
    empty = search_input_schema(())
    assert _dialect_problems(empty) == []
    jsonschema.Draft202012Validator.check_schema(empty)


@pytest.mark.parametrize("claims", CALLERS)
async def test_every_embedded_tool_schema_is_plain_json_schema(
    tmp_path: Path, claims: Mapping[str, Claim]
) -> None:
    """esra_larkspur and esra_larkspur_fetch, as each caller lists them."""
    tools = await _embedded_tools(tmp_path, claims)
    assert {tool.name for tool in tools} == {"esra_larkspur", "esra_larkspur_fetch"}
    for tool in tools:
        _check(tool)


async def test_every_tool_schema_of_a_multi_exposure_tenant_is_plain_json_schema() -> None:
    """Search and fetch tools of several exposures."""
    async with (
        open_world() as world,
        mcp_client(world.app, idp().token(department="finance")) as client,
    ):
        tools = (await client.list_tools()).tools
    assert len(tools) >= 3
    for tool in tools:
        _check(tool)


async def test_the_listed_input_schema_accepts_allowed_filters_and_refuses_others(
    tmp_path: Path,
) -> None:
    """A client validating against the schema sends only filters the host accepts."""
    (search,) = [
        t for t in await _embedded_tools(tmp_path, {"region": "emea"}) if t.name == "esra_larkspur"
    ]
    validator = jsonschema.Draft202012Validator(search.input_schema)
    accepted = [
        [{"field": "category", "operator": "eq", "value": "road bike"}],
        [{"field": "status", "operator": "in", "value": ["open", "pending"]}],
        [{"field": "price", "operator": "lte", "value": 1500}],
        [{"field": "opened", "operator": "gte", "value": "2024-01-31"}],
    ]
    refused = [
        [{"field": "internal_notes", "operator": "eq", "value": "x"}],
        [{"field": "no_such_field", "operator": "eq", "value": "x"}],
        [{"field": "price", "operator": "in", "value": [1, 2]}],
        [{"field": "price", "operator": "eq", "value": "cheap"}],
    ]
    for filters in accepted:
        validator.validate({"prompt": "bike", "filters": filters})
    for filters in refused:
        assert not validator.is_valid({"prompt": "bike", "filters": filters}), filters
