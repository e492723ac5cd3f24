"""Hostile arguments to ``esra_{slug}_fetch`` over MCP: classified, audited, nothing lost.

The core's own checks are in ``tests/core/fetch/test_fetch_hostile_input.py``; this is the
host's parsing in front of them, over HTTP with signed JWTs.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from esra.core.codes import AuditEvent
from esra.core.exceptions import InvalidRequestError
from esra.starlette._schemas import MAX_DOCUMENT_REF_CHARS, MAX_FETCH_CHARS, parse_fetch_arguments
from tests.starlette._tokens import idp
from tests.starlette._world import mcp_client, open_world

FETCH = "esra_hr_search_fetch"
NOT_FOUND = "ESRA_DOCUMENT_NOT_FOUND: No such document."


def _text(result: CallToolResult) -> str:
    first = result.content[0]
    assert first.type == "text"
    return first.text


async def _ref(client: Client) -> str:
    result = await client.call_tool("esra_hr_search", {"prompt": "leave"})
    assert result.structured_content is not None, _text(result)
    ref = result.structured_content["results"][0]["documentRef"]
    assert isinstance(ref, str)
    return ref


@pytest.mark.parametrize(
    "arguments",
    [
        {"offset": -1},
        {"offset": 1.5},
        {"offset": 0.0},
        {"offset": True},
        {"offset": "0"},
        {"offset": math.nan},
        {"maxChars": 0},
        {"maxChars": MAX_FETCH_CHARS + 1},
        {"maxChars": math.inf},
        {"maxChars": False},
        {"documentRef": ""},
        {"documentRef": "   "},
        {"documentRef": 12},
        {"documentRef": None},
        {"documentRef": "A" * (MAX_DOCUMENT_REF_CHARS + 1)},
        {"documentRef": "x", "extra": 1},
    ],
    ids=repr,
)
def test_hostile_fetch_arguments_are_invalid_requests(arguments: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError):
        parse_fetch_arguments({"documentRef": "x", **arguments})


def _variants(ref: str) -> list[str]:
    padded = ref + "=" * (-len(ref) % 4)
    standard = base64.b64encode(base64.urlsafe_b64decode(padded)).decode()
    lookalike = ref[:-1] + chr(0xFF21 + (ord(ref[-1]) - ord("A")) % 26)  # fullwidth letter
    return [
        f" {ref} ",
        ref + "\n",
        ref[:10] + "\u200b" + ref[10:],
        padded + "=",
        standard,
        lookalike,
        ref[:-4],
        ref + ref,
        ref[::-1],
    ]


async def test_respelled_references_are_not_found_and_the_real_one_still_serves() -> None:
    """Whitespace, padding, the standard alphabet, look-alikes, truncation, doubling: each is
    the same "not found" as any garbage, and none spends the caller's budget or its ref."""
    async with open_world() as world, mcp_client(world.app, idp().token()) as client:
        ref = await _ref(client)
        variants = _variants(ref)
        results = [await client.call_tool(FETCH, {"documentRef": v}) for v in variants]
        bad_pages = [
            await client.call_tool(FETCH, {"documentRef": ref, "offset": -1}),
            await client.call_tool(FETCH, {"documentRef": ref, "maxChars": 1.5}),
        ]
        served = await client.call_tool(FETCH, {"documentRef": ref})
        fetches = world.audit.events(AuditEvent.FETCH)
        invokes = [
            r for r in world.audit.events(AuditEvent.INVOKE) if r.dimensions["tool"] == FETCH
        ]

    assert [(r.is_error, _text(r)) for r in results] == [(True, NOT_FOUND)] * len(variants)
    assert all(r.is_error and _text(r).startswith("ESRA_INVALID_REQUEST:") for r in bad_pages)
    assert not served.is_error, _text(served)
    assert served.structured_content is not None
    assert served.structured_content["text"]
    # Every call is audited: one esra.invoke each, the rejected ones as rejected; every
    # call that reached the core is one esra.fetch record too, none naming a source.
    assert [r.outcome for r in invokes] == ["ok"] * len(variants) + ["rejected"] * 2 + ["ok"]
    assert [r.outcome for r in fetches] == ["denied"] * len(variants) + ["ok"]
    assert all("source_id" not in r.dimensions for r in fetches[:-1])
