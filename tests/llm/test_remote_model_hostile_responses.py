"""Remote model clients against hostile endpoints: what a response may cost to read.

A model endpoint (or whatever answers in its place) is as untrusted as the model itself:
whatever it sends, the client reads a bounded amount and either returns an answer or
raises ``ModelOutputError`` — never more memory than its cap, whatever the body claims.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest
import stamina

from esra.core.exceptions import ModelOutputError
from esra.core.prompts import Prompt, build_selection_prompt
from esra.llm import AnthropicMessagesModel, OpenAIChatModel
from esra.llm._http import MAX_RESPONSE_BYTES
from tests.core.factories import make_source
from tests.llm._pipeline import retrieve, retrieve_record
from tests.llm._vendors import (
    API_KEY,
    Received,
    Reply,
    VendorServer,
    chat_completion,
    openai_answering,
)

# The most a bounded read may allocate on top of its cap (the cap itself, one network chunk
# and what decoding a chunk needs); far below what the bombs below expand to.
_MEMORY_ALLOWANCE = 4 * MAX_RESPONSE_BYTES
_BOMB_BYTES = 256 * 1024 * 1024


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _prompt() -> Prompt:
    return build_selection_prompt("annual leave", [make_source("s-1")], model_profile="p")


def _gzip_of_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, packer.flush()])


def _openai(base_url: str) -> OpenAIChatModel:
    return OpenAIChatModel(f"{base_url}/v1", API_KEY, "gpt", timeout_s=10.0, max_retries=0)


def _anthropic(base_url: str) -> AnthropicMessagesModel:
    return AnthropicMessagesModel(
        API_KEY, "claude", base_url=base_url, timeout_s=10.0, max_retries=0
    )


async def _peak_while_failing(model: OpenAIChatModel | AnthropicMessagesModel) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(ModelOutputError, match=r"too large|cannot be read|not asked for"):
            await model.complete(_prompt())
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        await model.aclose()


@pytest.mark.parametrize("client", [_openai, _anthropic])
async def test_a_compression_bomb_is_refused_without_expanding_it(client: object) -> None:
    """A few hundred bytes declared as gzip applied twice expand to 256 MiB: the read stops
    at the cap instead of inflating the whole body (each layer multiplies the ratio, so one
    network chunk of such a body could otherwise expand to gigabytes)."""
    bomb = gzip.compress(_gzip_of_zeros(_BOMB_BYTES), 9)
    assert len(bomb) < 4096
    reply = Reply(body=bomb, headers=(("Content-Encoding", "gzip, gzip"),))
    async with VendorServer(lambda _: reply) as server:
        peak = await _peak_while_failing(client(server.base_url))  # type: ignore[operator]
    assert peak < _MEMORY_ALLOWANCE


async def test_a_single_gzip_bomb_is_refused_without_expanding_it() -> None:
    bomb = _gzip_of_zeros(_BOMB_BYTES)
    reply = Reply(body=bomb, headers=(("Content-Encoding", "gzip"),))
    async with VendorServer(lambda _: reply) as server:
        peak = await _peak_while_failing(_openai(server.base_url))
    assert peak < _MEMORY_ALLOWANCE


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "x-gzip", "GZIP", "identity", ""])
async def test_a_compressed_answer_within_the_cap_still_reads(encoding: str) -> None:
    content = json.dumps({"sources": ["s-1"]})
    raw = json.dumps(chat_completion(content)).encode()
    if encoding.lower() in {"gzip", "x-gzip"}:
        body = gzip.compress(raw)
    elif encoding == "deflate":
        body = zlib.compress(raw)
    else:
        body = raw
    headers = (("Content-Encoding", encoding),) if encoding else ()
    async with VendorServer(lambda _: Reply(body=body, headers=headers)) as server:
        model = _openai(server.base_url)
        try:
            assert await model.complete(_prompt()) == content
        finally:
            await model.aclose()


async def test_only_codings_the_client_can_bound_are_asked_for() -> None:
    """The request offers gzip and deflate only, whatever the host's httpx could decode."""
    content = json.dumps({"sources": ["s-1"]})
    async with VendorServer(lambda _: Reply.json(chat_completion(content))) as server:
        model = OpenAIChatModel(
            f"{server.base_url}/v1",
            API_KEY,
            "gpt",
            max_retries=0,
            extra_headers={"Accept-Encoding": "br, zstd"},
        )
        try:
            await model.complete(_prompt())
        finally:
            await model.aclose()
    assert server.received[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, deflate", "deflate, gzip"])
async def test_a_coding_that_was_not_asked_for_is_refused(encoding: str) -> None:
    body = json.dumps(chat_completion(json.dumps({"sources": ["s-1"]}))).encode()
    reply = Reply(body=body, headers=(("Content-Encoding", encoding),))
    async with VendorServer(lambda _: reply) as server:
        model = _openai(server.base_url)
        try:
            with pytest.raises(ModelOutputError, match="not asked for"):
                await model.complete(_prompt())
        finally:
            await model.aclose()


async def test_a_corrupt_gzip_body_is_refused() -> None:
    reply = Reply(body=b"\x1f\x8b\x08\x00garbage-garbage", headers=(("Content-Encoding", "gzip"),))
    async with VendorServer(lambda _: reply) as server:
        model = _openai(server.base_url)
        try:
            with pytest.raises(ModelOutputError, match="cannot be read"):
                await model.complete(_prompt())
        finally:
            await model.aclose()


@pytest.mark.parametrize("figure", [10**400, 2**63, 2**53])
async def test_a_token_count_no_meter_can_hold_is_garbled_usage(figure: int) -> None:
    """A usage figure of hundreds of digits is valid JSON: it made telemetry's histogram raise
    OverflowError out of the model call, and anything past 2**53 - 1 (a double's exact
    integers, which OTLP and JSON readers hold) put an unreadable figure on the audit record.
    Such a figure is garbled usage: nothing is recorded, the answer itself still counts."""
    usage = {"prompt_tokens": figure, "completion_tokens": 5}

    def handle(received: Received) -> Reply:
        content = json.loads(openai_answering(received).body)["choices"][0]["message"]["content"]
        return Reply.json(chat_completion(content, usage=usage))

    async with VendorServer(handle) as server:
        model = _openai(server.base_url)
        try:
            response, audit = await retrieve(model)
        finally:
            await model.aclose()
    assert response.warnings == ()
    assert "model_calls" not in retrieve_record(audit).dimensions
