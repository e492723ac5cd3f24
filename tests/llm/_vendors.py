"""Local HTTP servers on 127.0.0.1 speaking OpenAI's and Anthropic's wire formats.

``VendorServer`` is a small HTTP/1.1 server on ``asyncio.start_server`` (one request per
connection), so a test can answer in every way a real endpoint or a hostile one might:
well-formed completions, error bodies, HTML pages, a body cut off mid-way, or no answer at
all. Every request it receives is kept for the test to inspect.

The response shapes follow the vendors' API references: OpenAI's chat completion object
(``choices[].message`` with ``content`` and ``refusal``, ``finish_reason``, ``usage`` with
``prompt_tokens`` / ``completion_tokens``) and error object (``error.type`` / ``code``),
and Anthropic's message object (``content`` blocks of type ``text`` / ``tool_use``,
``stop_reason``, ``usage`` with ``input_tokens`` / ``output_tokens`` and the cache fields)
and error object (``type: error``, ``error.type``, ``request_id``).

The answering handlers rebuild the ``Prompt`` from the wire (system text, the user turn's
marked sections, the task from the schema or tool name) and let ``LocalModel`` answer it, so
a happy path goes through the real prompts, the real transport and the core's real parsers.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import attrs

from esra.core.prompts import Prompt, PromptTask, ReferenceItem
from esra.llm import LocalModel

__all__ = [
    "API_KEY",
    "Handler",
    "Received",
    "Reply",
    "VendorServer",
    "anthropic_answering",
    "anthropic_error",
    "anthropic_message",
    "chat_completion",
    "closed_port_url",
    "openai_answering",
    "openai_error",
    "prompt_from_wire",
    "task_of",
    "text_block",
    "tool_use",
]

API_KEY = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
"""The credential every test client uses; it must never show up in a log, repr or error."""

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}


@attrs.frozen
class Received:
    """One request as the server read it; header names are lower-cased."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """Return the request body parsed as JSON."""
        return json.loads(self.body)


@attrs.frozen
class Reply:
    """What the server sends back.

    ``cut_after`` closes the connection after that many body bytes while the declared
    Content-Length stays the full size (a response cut short); ``hang`` never answers.
    """

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    cut_after: int | None = None
    hang: bool = False

    @classmethod
    def json(
        cls, value: Any, *, status: int = 200, headers: tuple[tuple[str, str], ...] = ()
    ) -> Reply:
        """Return a JSON reply."""
        return cls(status=status, body=json.dumps(value).encode(), headers=headers)


Handler = Callable[[Received], Reply]


class VendorServer:
    """An HTTP server on a free port of 127.0.0.1: scripted replies first, then ``handler``."""

    def __init__(self, handler: Handler, *script: Reply | Handler) -> None:
        self._handler = handler
        self._script: deque[Reply | Handler] = deque(script)
        self._release = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self.received: list[Received] = []
        self.base_url = ""

    async def __aenter__(self) -> VendorServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_: object) -> None:
        self._release.set()
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    def bodies(self) -> list[Any]:
        """Return every request body received so far, parsed as JSON."""
        return [r.json() for r in self.received]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            received = await _read_request(reader)
            self.received.append(received)
            step = self._script.popleft() if self._script else self._handler
            reply = step if isinstance(step, Reply) else step(received)
            if reply.hang:
                await self._release.wait()
                return
            await _write_reply(writer, reply)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up first: nothing to answer
        finally:
            self._tasks.discard(task)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Received:
    request_line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    url = urlsplit(target)
    return Received(method, url.path, dict(parse_qsl(url.query)), headers, body)


async def _write_reply(writer: asyncio.StreamWriter, reply: Reply) -> None:
    head = [
        f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}",
        f"Content-Type: {reply.content_type}",
        f"Content-Length: {len(reply.body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in reply.headers),
    ]
    body = reply.body if reply.cut_after is None else reply.body[: reply.cut_after]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()


def closed_port_url() -> str:
    """Return a base URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# --- OpenAI chat completions -------------------------------------------------------------


def chat_completion(
    content: str | None,
    *,
    finish_reason: str = "stop",
    refusal: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a chat completion object as OpenAI's API reference shows it."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4.1-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": refusal,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage
        if usage is not None
        else {
            "prompt_tokens": 1117,
            "completion_tokens": 46,
            "total_tokens": 1163,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
    }


def openai_error(message: str, *, type_: str, code: str | None = None) -> dict[str, Any]:
    """Return an OpenAI error body."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# --- Anthropic Messages ------------------------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    """Return a ``text`` content block."""
    return {"type": "text", "text": text}


def tool_use(name: str, value: Any) -> dict[str, Any]:
    """Return a ``tool_use`` content block calling ``name`` with ``value`` as its input."""
    return {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": name, "input": value}


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    stop_reason: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a Messages API message object as Anthropic's API reference shows it."""
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage
        if usage is not None
        else {
            "input_tokens": 2095,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 503,
        },
    }


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    """Return an Anthropic error body."""
    return {
        "type": "error",
        "error": {"type": type_, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


# --- Answering from the wire with LocalModel ---------------------------------------------

_ITEM = re.compile(r"<<ESRA-DATA id=([^>]*)>>\n(.*?)\n<<END-ESRA-DATA id=\1>>", re.DOTALL)
_CONTRACT_KEYS = (
    ('{"sources"', PromptTask.SELECT_SOURCES),
    ('{"queries"', PromptTask.PLAN_SEARCHES),
    ('{"scores"', PromptTask.RERANK),
    ('{"answer"', PromptTask.ANSWER),
)


def task_of(name: str | None, user: str) -> PromptTask:
    """Return the task a request is for: from its schema or tool name, else its contract."""
    if name is not None:
        return PromptTask(name.removeprefix("esra_"))
    contract = user.rpartition("### OUTPUT_CONTRACT\n")[2]
    return next(task for key, task in _CONTRACT_KEYS if key in contract)


def prompt_from_wire(system: str, user: str, task: PromptTask) -> Prompt:
    """Rebuild the ``Prompt`` a client sent from its system text and user turn."""
    request_part, _, rest = user.partition("\n\n### REFERENCE\n")
    reference_part, _, contract = rest.partition("\n\n### OUTPUT_CONTRACT\n")
    request = _ITEM.search(request_part)
    assert request is not None
    return Prompt(
        task=task,
        model_profile="wire",
        system=system,
        request=request.group(2),
        reference=tuple(
            ReferenceItem(m.group(1), m.group(2)) for m in _ITEM.finditer(reference_part)
        ),
        output_contract=contract,
    )


_LOCAL = LocalModel()


def openai_answering(received: Received) -> Reply:
    """Answer a chat completions request as a well-behaved server would, via LocalModel."""
    body = received.json()
    system, user = (m["content"] for m in body["messages"])
    schema = body.get("response_format", {}).get("json_schema", {})
    answer = _LOCAL.answer(prompt_from_wire(system, user, task_of(schema.get("name"), user)))
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    return Reply.json(chat_completion(answer, usage=usage))


def anthropic_answering(received: Received) -> Reply:
    """Answer a Messages request as a well-behaved server would, via LocalModel."""
    body = received.json()
    user = body["messages"][0]["content"]
    tool = body.get("tool_choice", {}).get("name")
    answer = _LOCAL.answer(prompt_from_wire(body["system"], user, task_of(tool, user)))
    usage = {
        "input_tokens": 900,
        "cache_creation_input_tokens": 60,
        "cache_read_input_tokens": 40,
        "output_tokens": 50,
    }
    if tool is None:
        return Reply.json(anthropic_message([text_block(answer)], usage=usage))
    return Reply.json(
        anthropic_message(
            [text_block("Here is my answer."), tool_use(tool, json.loads(answer))],
            stop_reason="tool_use",
            usage=usage,
        )
    )
