"""Plain http only to this machine: a key and a tenant's prompts never cross a network in
cleartext unless the embedder says so in as many words.

A ``base_url`` of ``http://api.example.com/v1`` used to be accepted, and every request then
carried the API key (``Authorization``, ``api-key`` or ``x-api-key``) and prompts holding
enterprise record text unencrypted. Loopback (127.0.0.0/8, ``::1``, ``localhost``: the local
vLLM, Ollama and llama.cpp servers) keeps plain http; any other host needs https, unless
``allow_insecure_http=True``. Spellings that might reach loopback by another road (a decimal
or hex IPv4, an IPv4-mapped IPv6 address, ``0.0.0.0``) are refused: when in doubt, refuse.
"""

from __future__ import annotations

import httpx
import pytest

from esra.core.exceptions import ModelOutputError
from esra.core.prompts import build_selection_prompt
from esra.llm import AnthropicMessagesModel, OpenAIChatModel, is_loopback_url
from esra.llm._http import endpoint_url
from tests.core.factories import make_source
from tests.llm._vendors import API_KEY

_LOOPBACK = [
    "http://127.0.0.1:8000/v1",
    "http://127.8.9.10/v1",
    "HTTP://127.0.0.1:11434/v1",
    "http://localhost:8080/v1",
    "http://LOCALHOST:8080/v1",
    "http://[::1]:8000/v1",
    "http://[0:0:0:0:0:0:0:1]/v1",
]
_ELSEWHERE = [
    "http://api.example.com/v1",
    "HTTP://api.example.com/v1",
    "http://127.0.0.1.evil.com/v1",
    "http://localhost.evil.com/v1",
    "http://localhost./v1",
    "http://[::ffff:127.0.0.1]/v1",
    "http://0.0.0.0:8000/v1",
    "http://2130706433/v1",
    "http://0x7f000001/v1",
    "http://0x7f.0.0.1/v1",
    "http://017700000001/v1",
    "http://127.1/v1",
    "http://10.0.0.5:8000/v1",
    "http://[fe80::1]/v1",
]
_SECRET_PATH = "/tenant-7f3a/v1"


@pytest.mark.parametrize("base_url", _LOOPBACK)
def test_plain_http_to_a_loopback_host_is_accepted(base_url: str) -> None:
    assert is_loopback_url(base_url)
    assert endpoint_url(base_url, "/chat/completions").endswith("/v1/chat/completions")


@pytest.mark.parametrize("base_url", _ELSEWHERE)
def test_plain_http_anywhere_else_is_refused_without_quoting_the_url(base_url: str) -> None:
    assert not is_loopback_url(base_url)
    url = base_url.replace("/v1", _SECRET_PATH)
    with pytest.raises(ValueError, match="https") as refused:
        endpoint_url(url, "/chat/completions")
    message = str(refused.value)
    assert "tenant-7f3a" not in message
    assert httpx.URL(url).host not in message


@pytest.mark.parametrize("base_url", _ELSEWHERE)
def test_an_explicit_opt_in_allows_plain_http(base_url: str) -> None:
    assert endpoint_url(base_url, "/chat/completions", allow_insecure_http=True)


@pytest.mark.parametrize(
    "base_url", ["https://api.example.com/v1", "HTTPS://api.example.com/v1", "https://10.0.0.5/v1"]
)
def test_https_is_accepted_anywhere(base_url: str) -> None:
    assert endpoint_url(base_url, "/chat/completions")


def _build(vendor: str, *, allow: bool) -> OpenAIChatModel | AnthropicMessagesModel:
    remote = "http://models.example.com"
    if vendor == "openai":
        return OpenAIChatModel(f"{remote}/v1", API_KEY, "gpt", allow_insecure_http=allow)
    if vendor == "azure":
        return OpenAIChatModel.azure(
            remote, "dep", API_KEY, api_version="2024-10-21", allow_insecure_http=allow
        )
    return AnthropicMessagesModel(API_KEY, "claude", base_url=remote, allow_insecure_http=allow)


@pytest.mark.parametrize("vendor", ["openai", "azure", "anthropic"])
def test_every_client_refuses_plain_http_to_another_host_at_construction(vendor: str) -> None:
    """The key is never quoted, and the opt-in is a keyword of each constructor."""
    with pytest.raises(ValueError, match="https") as refused:
        _build(vendor, allow=False)
    assert API_KEY not in str(refused.value)
    assert "models.example.com" not in str(refused.value)
    assert _build(vendor, allow=True) is not None


async def test_an_opted_in_client_still_sends_over_plain_http() -> None:
    """The opt-in is honoured: the request goes out to the named host as asked."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = OpenAIChatModel(
            "http://models.internal/v1",
            API_KEY,
            "gpt",
            max_retries=0,
            http_client=client,
            allow_insecure_http=True,
        )
        prompt = build_selection_prompt("leave", [make_source("s-1")], model_profile="p")
        with pytest.raises(ModelOutputError, match="HTTP 503"):
            await model.complete(prompt)
    assert [str(r.url) for r in seen] == ["http://models.internal/v1/chat/completions"]
