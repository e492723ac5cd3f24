"""What parsing a model endpoint's answer may cost: a few MiB, whatever the body holds.

The 4 MiB response cap bounded the bytes read, not what ``json.loads`` made of them: 4 MiB of
``[{},{},...]`` became 1.4 million dicts, a peak of about 100 MB per concurrent call
(measured with tracemalloc). Now the body is capped by what the longest answer the core
accepts (``MAX_ANSWER_CHARS``, every character escaped) can take, and its JSON values are
counted before it is parsed; a body past either bound is a ``ModelOutputError`` that quotes
none of it.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator

import pytest
import stamina

from esra.core._prompts.contracts import MAX_ANSWER_CHARS
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import Prompt, PromptTask, build_selection_prompt, output_schema_name
from esra.llm import AnthropicMessagesModel, OpenAIChatModel
from esra.llm._http import MAX_JSON_VALUES, MAX_RESPONSE_BYTES
from tests.core.factories import make_source
from tests.llm._vendors import (
    API_KEY,
    Reply,
    VendorServer,
    anthropic_message,
    chat_completion,
    tool_use,
)

# What one failing call may allocate at its peak: the body, its decoded text and what parsing
# it may make, all bounded above. The old cap let a body of empty objects cost ~100 MB.
_PEAK_ALLOWANCE = 12 * 1024 * 1024
_HOSTILE_BYTES = 4 * 1024 * 1024
_MARK = "zq-hostile-zq"


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _prompt() -> Prompt:
    return build_selection_prompt("annual leave", [make_source("s-1")], model_profile="p")


def _openai(base_url: str) -> OpenAIChatModel:
    return OpenAIChatModel(f"{base_url}/v1", API_KEY, "gpt", max_retries=0)


def _filled(unit: bytes, size: int, *, head: bytes = b"[", tail: bytes = b"0]") -> bytes:
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def _hostile_bodies() -> dict[str, bytes]:
    within = MAX_RESPONSE_BYTES - 16
    return {
        # The old cap's worst case, read whole under it before.
        "empty objects, 4 MiB": _filled(b"{},", _HOSTILE_BYTES, tail=b"{}]"),
        # Under the new byte cap: the value count refuses them.
        "empty objects": _filled(b"{},", within, tail=b"{}]"),
        "empty arrays": _filled(b"[],", within, tail=b"[]]"),
        "zeros": _filled(b"0,", within),
        "floats": _filled(b"0.5,", within),
        "object members": b"{" + b"".join(b'"k%d":{},' % i for i in range(200_000))[:-1],
        "nested arrays": b"[" * (within // 2) + b"]" * (within // 2),
        "nested objects": b'{"a":' * (within // 5),
        "one-member objects": _filled(b'{"a":0},', within, tail=b"0]"),
        "empty strings": _filled(b'"",', within),
        "strings of commas": _filled(b'",",', within),
    }


@pytest.mark.parametrize("name", list(_hostile_bodies()))
async def test_a_hostile_body_costs_a_few_mib_and_is_classified(name: str) -> None:
    body = _hostile_bodies()[name]
    async with VendorServer(lambda _: Reply(body=body)) as server:
        model = _openai(server.base_url)
        tracemalloc.start()
        try:
            with pytest.raises(ModelOutputError, match=r"too large|not JSON") as refused:
                await model.complete(_prompt())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await model.aclose()
    assert peak < _PEAK_ALLOWANCE, f"{name}: {peak / 2**20:.1f} MiB"
    assert "{}" not in str(refused.value)


async def test_a_long_string_widened_by_one_character_is_refused() -> None:
    """Text of one byte a character decodes four bytes wide once a single astral character
    shows up; the decoded text is held to the byte cap too."""
    text = "a" * (MAX_RESPONSE_BYTES // 2) + "\U0001f600"
    body = json.dumps(chat_completion(text), ensure_ascii=False).encode()
    assert len(body) < MAX_RESPONSE_BYTES
    async with VendorServer(lambda _: Reply(body=body)) as server:
        model = _openai(server.base_url)
        tracemalloc.start()
        try:
            with pytest.raises(ModelOutputError, match="too large"):
                await model.complete(_prompt())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            await model.aclose()
    assert peak < _PEAK_ALLOWANCE


def _longest_answer(alphabet: str) -> str:
    """An answer of exactly MAX_ANSWER_CHARS characters, a JSON object as the contract asks."""
    head, tail = '{"sources": ["s-1"], "note": "', '"}'
    room = MAX_ANSWER_CHARS - len(head) - len(tail)
    return head + (alphabet * room)[:room] + tail


@pytest.mark.parametrize(
    ("alphabet", "ensure_ascii"),
    [
        ("plain text, ", True),
        ("é中\u2028\x01", True),  # every one escaped as \uXXXX: six bytes a character
        ("é中𝄞", False),  # sent as UTF-8, up to four bytes a character
    ],
)
async def test_the_longest_answer_the_core_accepts_still_reads(
    alphabet: str, ensure_ascii: bool
) -> None:
    answer = _longest_answer(alphabet)
    assert len(answer) == MAX_ANSWER_CHARS
    body = json.dumps(chat_completion(answer), ensure_ascii=ensure_ascii).encode()
    async with VendorServer(lambda _: Reply(body=body)) as server:
        model = _openai(server.base_url)
        try:
            assert await model.complete(_prompt()) == answer
        finally:
            await model.aclose()


async def test_the_longest_structured_answer_still_reads() -> None:
    """An Anthropic tool call's input is parsed as structure: one holding as many values as
    MAX_ANSWER_CHARS characters of compact JSON can is still read."""
    head = len('{"sources":[]}')
    tool_input: dict[str, list[list[int]]] = {
        "sources": [[]] * ((MAX_ANSWER_CHARS - head + 1) // 3)
    }
    assert len(json.dumps(tool_input, separators=(",", ":"))) > MAX_ANSWER_CHARS - 3
    assert len(json.dumps(tool_input, separators=(",", ":"))) <= MAX_ANSWER_CHARS
    tool = output_schema_name(PromptTask.SELECT_SOURCES)
    message = anthropic_message([tool_use(tool, tool_input)])
    body = json.dumps(message, separators=(",", ":")).encode()
    async with VendorServer(lambda _: Reply(body=body)) as server:
        model = AnthropicMessagesModel(API_KEY, "claude", base_url=server.base_url, max_retries=0)
        try:
            assert json.loads(await model.complete(_prompt())) == tool_input
        finally:
            await model.aclose()


def test_the_bounds_follow_from_the_longest_answer() -> None:
    """Six bytes spell any character of the Basic Multilingual Plane (``\\uXXXX``); the
    densest JSON (``[[],[],...]``, ``["","",...]``) holds two counted tokens in every three
    characters."""
    assert MAX_RESPONSE_BYTES >= 6 * MAX_ANSWER_CHARS
    assert MAX_JSON_VALUES >= 2 * MAX_ANSWER_CHARS // 3
    assert MAX_RESPONSE_BYTES < 4 * 1024 * 1024
