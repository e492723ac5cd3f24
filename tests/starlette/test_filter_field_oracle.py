"""Issue 13, item 2: ``filters`` is no oracle for field names outside the caller's reach.

On the embedded default, the tickets' ``internal_notes`` is restricted, their ``region`` and
``customer`` are hidden or not filterable, and the products' ``cost`` is restricted. A filter
on any of them used to answer with the validator's precise reason (``FIELD_RESTRICTED``,
``FIELD_NOT_FILTERABLE``) while an unknown field answered "cannot apply every requested
filter", so a caller could tell which names exist. Now each is the same
``ESRA_INVALID_REQUEST``, byte for byte, naming the fields the caller may filter on — the
very fields the tool's input schema lists for that caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from esra.starlette._devtoken import load_or_create_dev_issuer
from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT
from esra.starlette._host import build_app
from esra.starlette._parts import open_embedded
from tests.starlette._world import mcp_client

# A dev token's claim value.
Claim = str | tuple[str, ...]

TOOL = "esra_larkspur"
SUPPORT_AGENT: Mapping[str, Claim] = {"region": "emea"}
SUPPORT_FIELDS = ("category", "opened", "owner", "price", "product", "status", "updated")
ALLOWED = (
    "ESRA_INVALID_REQUEST: A filter may name only these fields: "
    "category, opened, owner, price, product, status, updated."
)


def _token(data_dir: Path, claims: Mapping[str, Claim]) -> str:
    return load_or_create_dev_issuer(data_dir).mint(
        tenant=EMBEDDED_TENANT,
        subject="alice",
        client_app=EMBEDDED_CLIENT_APP,
        now=datetime.now(UTC),
        claims=dict(claims),
        lifetime_s=600,
    )


async def _answers(
    data_dir: Path, claims: Mapping[str, Claim], filters: list[dict[str, Any]]
) -> list[tuple[bool, str]]:
    """Each filter alone, in one search call each: whether it failed, and the text."""
    answers = []
    async with open_embedded(data_dir) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000)
        async with (
            app.router.lifespan_context(app),
            mcp_client(app, _token(data_dir, claims)) as client,
        ):
            for one in filters:
                result = await client.call_tool(TOOL, {"prompt": "bike", "filters": [one]})
                first = result.content[0]
                assert first.type == "text"
                answers.append((result.is_error, first.text))
    return answers


async def _filter_schema(data_dir: Path, claims: Mapping[str, Claim]) -> dict[str, Any]:
    async with open_embedded(data_dir) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000)
        async with (
            app.router.lifespan_context(app),
            mcp_client(app, _token(data_dir, claims)) as client,
        ):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    schema: dict[str, Any] = tools[TOOL].input_schema["properties"]["filters"]
    return schema


def _listed(schema: Mapping[str, Any]) -> dict[str, list[str]]:
    """The schema's fields and their operators."""
    entries = schema["items"]["anyOf"]
    return {
        entry["properties"]["field"]["enum"][0]: entry["properties"]["operator"]["enum"]
        for entry in entries
    }


async def test_a_restricted_field_and_an_unknown_one_get_byte_identical_refusals(
    tmp_path: Path,
) -> None:
    """internal_notes (restricted), cost (restricted), region (hidden), customer (not
    filterable), a made-up name: one answer, ESRA_INVALID_REQUEST naming the allowed fields."""
    names = ["internal_notes", "cost", "region", "customer", "no_such_field", "tenant", "scope"]
    answers = await _answers(
        tmp_path,
        SUPPORT_AGENT,
        [{"field": name, "operator": "eq", "value": "x"} for name in names],
    )
    assert answers == [(True, ALLOWED)] * len(names)


async def test_an_operator_the_field_does_not_take_names_the_allowed_ones(
    tmp_path: Path,
) -> None:
    """price takes range operators, category a choice: each refusal says which."""
    answers = await _answers(
        tmp_path,
        SUPPORT_AGENT,
        [
            {"field": "price", "operator": "in", "value": [1, 2]},
            {"field": "category", "operator": "gt", "value": "road bike"},
            {"field": "price", "operator": "lt", "value": "cheap"},
        ],
    )
    assert answers == [
        (
            True,
            "ESRA_INVALID_REQUEST: A filter on price may use only these operators: "
            "eq, lt, lte, gt, gte.",
        ),
        (
            True,
            "ESRA_INVALID_REQUEST: A filter on category may use only these operators: eq, ne, in.",
        ),
        (True, "ESRA_INVALID_REQUEST: A filter on price takes a number."),
    ]


async def test_the_schema_lists_exactly_the_fields_this_caller_may_filter(
    tmp_path: Path,
) -> None:
    """With the region claim the tickets' fields are listed; without it (their record filter
    drops the source) they are not; with document scopes the store's format is. Never a
    restricted or hidden field, whoever calls."""
    agent = _listed(await _filter_schema(tmp_path, SUPPORT_AGENT))
    assert tuple(agent) == SUPPORT_FIELDS
    assert agent["price"] == ["eq", "lt", "lte", "gt", "gte"]
    assert agent["status"] == ["eq", "ne", "in"]
    stranger = _listed(await _filter_schema(tmp_path, {}))
    assert tuple(stranger) == ("category", "owner", "price", "updated")
    reader = _listed(
        await _filter_schema(tmp_path, {**SUPPORT_AGENT, "document_scopes": ("public",)})
    )
    assert tuple(reader) == ("category", "format", "opened", "owner", *SUPPORT_FIELDS[3:])
    for listed in (agent, stranger, reader):
        assert not {"internal_notes", "cost", "region", "customer", "tenant", "scope"} & set(listed)


async def test_a_caller_is_refused_exactly_the_fields_its_schema_does_not_list(
    tmp_path: Path,
) -> None:
    """Without the region claim, status (a ticket field) reads like an unknown field."""
    answers = await _answers(tmp_path, {}, [{"field": "status", "operator": "eq", "value": "x"}])
    assert answers == [
        (
            True,
            "ESRA_INVALID_REQUEST: A filter may name only these fields: "
            "category, owner, price, updated.",
        )
    ]
