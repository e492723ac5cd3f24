"""The search tool's ``filters`` argument over the embedded demo: narrowing, and refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from esra.starlette._devtoken import load_or_create_dev_issuer
from esra.starlette._embedded import EMBEDDED_CLIENT_APP, EMBEDDED_TENANT
from esra.starlette._host import build_app
from esra.starlette._parts import open_embedded
from tests.starlette._world import mcp_client

PROMPT = "bike with a battery for commuting"


async def _call(data_dir: Path, arguments: dict[str, Any]) -> CallToolResult:
    token = load_or_create_dev_issuer(data_dir).mint(
        tenant=EMBEDDED_TENANT,
        subject="alice",
        client_app=EMBEDDED_CLIENT_APP,
        now=datetime.now(UTC),
        claims={"region": "emea"},
        lifetime_s=600,
    )
    async with open_embedded(data_dir) as parts:
        app = build_app(parts, host="127.0.0.1", port=8000)
        async with app.router.lifespan_context(app), mcp_client(app, token) as client:
            return await client.call_tool("esra_larkspur", arguments)


def _sources_and_titles(result: CallToolResult) -> list[tuple[str, str]]:
    assert result.structured_content is not None, result.content
    return [(r["source"], r["title"]) for r in result.structured_content["results"]]


async def test_a_filter_keeps_only_matching_records_of_sources_that_can_apply_it(
    tmp_path: Path,
) -> None:
    """category = road bike: catalog rows of that category only; other sources not searched."""
    unfiltered = _sources_and_titles(await _call(tmp_path, {"prompt": PROMPT}))
    assert any("E-" in title or "electric" in title.lower() for _, title in unfiltered)
    filtered = await _call(
        tmp_path,
        {
            "prompt": PROMPT,
            "filters": [{"field": "category", "operator": "eq", "value": "road bike"}],
        },
    )
    rows = _sources_and_titles(filtered)
    assert rows
    assert {source for source, _ in rows} == {"Product catalog"}
    assert filtered.structured_content is not None
    codes = {w["code"] for w in filtered.structured_content["warnings"]}
    assert "ESRA_CALLER_FILTER_UNSUPPORTED" in codes


async def test_a_filter_the_validator_refuses_is_never_ignored(tmp_path: Path) -> None:
    """An allowed field with a value the validator refuses yields no results, not unfiltered
    ones: the checked filter is still validated like the planner's own."""
    result = await _call(
        tmp_path,
        {
            "prompt": PROMPT,
            "filters": [{"field": "category", "operator": "eq", "value": "1; DROP TABLE products"}],
        },
    )
    assert _sources_and_titles(result) == []
    assert result.structured_content is not None
    assert result.structured_content["status"] == "degraded"
    codes = {w["code"] for w in result.structured_content["warnings"]}
    assert "ESRA_PLAN_REJECTED" in codes
