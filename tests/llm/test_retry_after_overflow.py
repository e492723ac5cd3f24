"""A hostile Retry-After: whatever date a 429 or 503 names, it is a wait (capped) or absent.

``email.utils.parsedate_to_datetime`` raises ``OverflowError`` (not ``ValueError``) for a
year, hour or zone offset too large for a C integer; escaping ``retry_after_s`` it was no
transient failure, so the 429 was not retried and the client raised an unclassified error
instead of ``ModelOutputError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
import stamina

from esra.core.prompts import build_selection_prompt
from esra.llm import AnthropicMessagesModel, OpenAIChatModel
from esra.llm._http import retry_after_s
from tests.core.factories import make_source
from tests.llm._vendors import (
    API_KEY,
    Reply,
    VendorServer,
    anthropic_answering,
    anthropic_error,
    openai_answering,
    openai_error,
)

_NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
_HUGE = "9" * 25

_OVERFLOWING_DATES = [
    f"Mon, 01 Jan {_HUGE} 00:00:00 GMT",
    f"Sun, 01 Mar 2026 {_HUGE}:00:00 GMT",
    f"Sun, 01 Mar 2026 12:00:00 +{_HUGE}",
]


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


@pytest.mark.parametrize("value", _OVERFLOWING_DATES)
def test_a_date_too_large_for_the_calendar_counts_as_absent(value: str) -> None:
    assert retry_after_s(httpx.Headers({"Retry-After": value}), now=_NOW) is None


@pytest.mark.parametrize("value", _OVERFLOWING_DATES)
@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_a_rate_limit_with_an_overflowing_date_is_still_retried(
    vendor: str, value: str
) -> None:
    prompt = build_selection_prompt("annual leave", [make_source("s-1")], model_profile="p")
    headers = (("Retry-After", value),)
    if vendor == "openai":
        limited = Reply.json(
            openai_error("slow down", type_="requests"), status=429, headers=headers
        )
        async with (
            VendorServer(openai_answering, limited) as server,
            OpenAIChatModel(f"{server.base_url}/v1", API_KEY, "gpt", max_retries=1) as openai,
        ):
            assert await openai.complete(prompt)
    else:
        busy = Reply.json(anthropic_error("overloaded_error", "busy"), status=529, headers=headers)
        async with (
            VendorServer(anthropic_answering, busy) as server,
            AnthropicMessagesModel(
                API_KEY, "claude", base_url=server.base_url, max_retries=1
            ) as anthropic,
        ):
            assert await anthropic.complete(prompt)
    assert len(server.received) == 2
