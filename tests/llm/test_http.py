"""The remote clients' shared transport: what is retried, how long it waits, what it refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import stamina
from stamina.instrumentation import RetryDetails, get_on_retry_hooks, set_on_retry_hooks

from esra.core.exceptions import ModelOutputError
from esra.core.prompts import PromptTask, build_selection_prompt, output_schema_name
from esra.llm import AnthropicMessagesModel, OpenAIChatModel
from esra.llm._http import (
    RetryPolicy,
    Secret,
    TransientHTTPError,
    checked_headers,
    endpoint_url,
    retry_after_s,
)
from tests.core.factories import make_source
from tests.llm._vendors import API_KEY, Reply, VendorServer, openai_answering, openai_error

_NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"Retry-After": "Sun, 01 Mar 2026 12:00:30 GMT"}, 30.0),
        ({"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0.0),
        ({"retry-after-ms": "soon", "Retry-After": "3"}, 3.0),
        ({"Retry-After": "-5"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "tomorrow"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_milliseconds_seconds_and_dates(
    headers: dict[str, str], seconds: float | None
) -> None:
    """``retry-after-ms`` wins; Retry-After is seconds or an HTTP date; junk is absent."""
    assert retry_after_s(httpx.Headers(headers), now=_NOW) == seconds


_POLICY = RetryPolicy(attempts=3, retry_after_cap_s=5.0)


@pytest.mark.parametrize(
    ("exc", "decision"),
    [
        (TransientHTTPError(503, None), True),
        (TransientHTTPError(429, 2.0), 2.0),
        (TransientHTTPError(429, 3600.0), 5.0),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (httpx.RemoteProtocolError("peer closed connection"), True),
        (TimeoutError(), True),
        (httpx.UnsupportedProtocol("gopher"), False),
        (ModelOutputError("not JSON"), False),
        (ValueError("bug"), False),
    ],
)
def test_only_transient_failures_are_retried(exc: Exception, decision: bool | float) -> None:
    """429/5xx, connection errors and timeouts back off; a Retry-After is capped."""
    assert _POLICY.backoff(exc) == decision


@pytest.fixture
def waits() -> Iterator[list[float]]:
    """Record the wait stamina schedules before each retry."""
    recorded: list[float] = []
    previous = get_on_retry_hooks()

    def record(details: RetryDetails) -> None:
        recorded.append(details.wait_for)

    set_on_retry_hooks([record])
    try:
        yield recorded
    finally:
        set_on_retry_hooks(previous)


async def test_a_servers_retry_after_sets_the_wait_up_to_the_cap(waits: list[float]) -> None:
    """Retry-After 30 s waits only the 0.05 s cap; retry-after-ms 10 waits 0.01 s."""
    assert stamina.is_testing() is False  # real waits: the hook's value is what stamina uses
    limited = openai_error("Rate limit reached", type_="requests")
    script = (
        Reply.json(limited, status=429, headers=(("Retry-After", "30"),)),
        Reply.json(limited, status=429, headers=(("retry-after-ms", "10"),)),
    )
    prompt = build_selection_prompt("leave", [make_source("s-2")], model_profile="default")
    async with (
        VendorServer(openai_answering, *script) as server,
        OpenAIChatModel(
            server.base_url, API_KEY, "gpt-4.1", max_retries=2, retry_after_cap_s=0.05
        ) as model,
    ):
        assert await model.complete(prompt)
    assert waits == pytest.approx([0.05, 0.01])
    assert len(server.received) == 3


def test_a_secret_never_shows_its_value() -> None:
    """``repr`` and ``str`` hide the credential; only ``reveal`` gives it."""
    secret = Secret(API_KEY)
    assert API_KEY not in repr(secret)
    assert API_KEY not in str(secret)
    assert API_KEY not in f"{secret} {[secret]}"
    assert secret.reveal() == API_KEY


@pytest.mark.parametrize("value", ["", " padded ", "line\nbreak", "tab\there", "caf\u00e9"])
def test_a_credential_that_cannot_be_a_header_value_is_refused(value: str) -> None:
    """Empty, padded, control or non-ASCII values fail at construction, unquoted."""
    with pytest.raises(ValueError, match="credential") as raised:
        Secret(value)
    assert not value.strip() or value.strip() not in str(raised.value)


def test_extra_headers_need_token_names() -> None:
    """A header name with a space or colon is refused; values are kept as secrets."""
    assert repr(checked_headers({"X-Tenant": "acme"})) == "{'X-Tenant': Secret('***')}"
    with pytest.raises(ValueError, match="header name"):
        checked_headers({"X Tenant: evil": "acme"})


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
    ],
)
def test_endpoint_url_appends_the_path(base_url: str, url: str) -> None:
    """A trailing slash on the base does not double up."""
    assert endpoint_url(base_url, "/chat/completions") == url


@pytest.mark.parametrize(
    "base_url",
    [
        "",
        "api.openai.com/v1",
        "file:///etc/passwd",
        "https://u:p@h/v1",
        "https://h/?a=1",
        "https://h/#f",
    ],
)
def test_endpoint_url_refuses_anything_but_a_plain_http_base(base_url: str) -> None:
    """No scheme or host, another scheme, credentials, a query or a fragment: refused."""
    with pytest.raises(ValueError, match="base_url"):
        endpoint_url(base_url, "/chat/completions")


# --- redirects ----------------------------------------------------------------------------------

_MODEL_HOST = "models.example.com"


def _redirecting(
    seen: list[httpx.Request], answer: dict[str, Any], status: int
) -> httpx.MockTransport:
    """The model host redirects every request elsewhere; the other host answers in full."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == _MODEL_HOST:
            location = f"https://attacker.example.net{request.url.path}"
            return httpx.Response(status, headers={"location": location}, json=answer)
        return httpx.Response(200, json=answer)

    return httpx.MockTransport(handler)


def _vendor_model(
    vendor: str, client: httpx.AsyncClient
) -> AnthropicMessagesModel | OpenAIChatModel:
    base = f"https://{_MODEL_HOST}"
    if vendor == "anthropic":
        return AnthropicMessagesModel(
            API_KEY, "claude", base_url=base, http_client=client, max_retries=0
        )
    if vendor == "azure":
        return OpenAIChatModel.azure(
            base, "dep", API_KEY, api_version="2024-10-21", http_client=client, max_retries=0
        )
    return OpenAIChatModel(f"{base}/v1", API_KEY, "gpt", http_client=client, max_retries=0)


def _answer(vendor: str) -> dict[str, Any]:
    if vendor == "anthropic":
        tool = {
            "type": "tool_use",
            "id": "t",
            "name": output_schema_name(PromptTask.SELECT_SOURCES),
            "input": {"sources": ["s-1"]},
        }
        return {
            "type": "message",
            "role": "assistant",
            "stop_reason": "tool_use",
            "content": [tool],
        }
    message = {"role": "assistant", "content": json.dumps({"sources": ["s-1"]})}
    return {"choices": [{"finish_reason": "stop", "message": message}]}


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("vendor", ["anthropic", "azure", "openai"])
async def test_a_redirect_is_never_followed_even_by_a_hosts_client(
    vendor: str, status: int
) -> None:
    """A host's client that follows redirects still sends each request once, to the model host
    only: the credential never reaches the redirect target, and the redirect (whatever body it
    carries) is a refused request, not an answer."""
    seen: list[httpx.Request] = []
    transport = _redirecting(seen, _answer(vendor), status)
    async with httpx.AsyncClient(transport=transport, follow_redirects=True) as client:
        model = _vendor_model(vendor, client)
        prompt = build_selection_prompt("annual leave", [make_source("s-1")], model_profile="p")
        with pytest.raises(ModelOutputError, match="redirect"):
            await model.complete(prompt)
    assert [r.url.host for r in seen] == [_MODEL_HOST]
