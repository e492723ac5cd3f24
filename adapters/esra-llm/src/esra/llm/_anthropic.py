"""AnthropicMessagesModel: the LanguageModel port over Anthropic's Messages API.

Structured output uses the tool-use mechanism: the task's output contract is offered as the
one tool, with its JSON Schema as the tool's ``input_schema``, and ``tool_choice`` forces
the model to call it. The model's answer is then the tool call's ``input`` object, which
this client serializes back to JSON text for the core to parse. That works with every Claude
model of the Messages API (no beta header), and the schema steers the model far more firmly
than a "JSON only" instruction, which a model may wrap in prose or a code fence. The
contract text stays in the prompt, and the core still parses and validates every answer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx

from esra.core.exceptions import ModelOutputError
from esra.core.prompts import Prompt, output_schema, output_schema_name
from esra.llm._http import JsonPoster, Secret, checked_headers, endpoint_url
from esra.llm._remote import RemoteModelClient
from esra.llm._wire import report_usage, system_text, token_count, user_text

__all__ = ["AnthropicMessagesModel"]

_log = logging.getLogger("esra.llm")

_TOOL_DESCRIPTION = (
    "Give your answer by calling this tool; its input is the answer in the output contract."
)
# Stop reasons that mean the answer is incomplete or was not given.
_UNUSABLE_STOPS = {
    "max_tokens": "the model's answer was cut off at its token limit",
    "model_context_window_exceeded": "the model's answer was cut off at its context window",
    "pause_turn": "the model paused before answering",
    "refusal": "the model refused to answer",
}


class AnthropicMessagesModel(RemoteModelClient):
    """Complete ESRA's prompts with Anthropic's Messages API (``POST /v1/messages``).

    The system section becomes ``system``; the request, reference data and output contract
    become one user message, in that order. With ``structured_output`` the answer is forced
    through a tool whose input schema is the task's JSON Schema (see the module docstring);
    without it the model answers in text from the contract alone. ``stop_reason``
    ``max_tokens`` or ``refusal``, an error body, an answer with neither the tool call nor
    text, a refused request (4xx other than 429) or an endpoint still unavailable after the
    retries (429, 5xx including 529 ``overloaded_error``, connection errors, timeouts)
    raises ``ModelOutputError``, which the calling stage turns into its fallback warning.
    Token usage (input, cache-creation and cache-read input tokens, output tokens) is
    reported to the invocation's audit record (``esra.core._model_usage``).

    Args:
        api_key: the key the host resolved (from its ``SecretStore``); sent as
            ``x-api-key``, never logged or shown by ``repr``.
        model: the model name, e.g. ``claude-sonnet-4-5``.
        base_url: the API root (a gateway or a compatible server may stand in).
        anthropic_version: the ``anthropic-version`` header.
        max_tokens: the answer's token limit (required by the API); a rerank of 200 results
            needs a few thousand.
        timeout_s: bound on the whole call: every attempt (response body included),
            backoff and Retry-After wait. The default, 10 s, is half the default
            invocation deadline (20 s), so a stage that gives up still leaves the
            search and the other stages their time.
        max_retries: further attempts after a transient failure; 0 disables retries.
        structured_output: force the answer through the contract's tool (see above).
        temperature: sent as ``temperature`` (0 by default); ``None`` omits it.
        extra_headers: further headers, e.g. ``anthropic-beta``; values are treated as
            secrets too.
        retry_after_cap_s: the longest a server's Retry-After is honoured for.
        http_client: a host-owned ``httpx.AsyncClient``; the model then does not close it.
        allow_insecure_http: allow a plain ``http://`` base URL to a host other than
            this machine's loopback, which sends the key and the prompts in
            cleartext; without it such a URL is a ``ValueError``.
    """

    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        base_url: str = "https://api.anthropic.com",
        anthropic_version: str = "2023-06-01",
        max_tokens: int = 4096,
        timeout_s: float = 10.0,
        max_retries: int = 2,
        structured_output: bool = True,
        temperature: float | None = 0.0,
        extra_headers: Mapping[str, str] | None = None,
        retry_after_cap_s: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
        allow_insecure_http: bool = False,
    ) -> None:
        if not model:
            msg = "model must name the model"
            raise ValueError(msg)
        if max_tokens < 1:
            msg = "max_tokens must be at least 1"
            raise ValueError(msg)
        self._base_url = base_url
        self._url = endpoint_url(base_url, "/v1/messages", allow_insecure_http=allow_insecure_http)
        self._key = Secret(api_key)
        self._model = model
        self._max_tokens = max_tokens
        self._structured = structured_output
        self._temperature = temperature
        self._extra = checked_headers(
            {**(extra_headers or {}), "anthropic-version": anthropic_version}
        )
        self._poster = JsonPoster(
            timeout_s=timeout_s,
            max_retries=max_retries,
            retry_after_cap_s=retry_after_cap_s,
            http_client=http_client,
        )

    async def complete(self, prompt: Prompt) -> str:
        """Return the model's raw answer text to ``prompt``.

        Raises:
            ModelOutputError: no usable answer (see the class docstring).
        """
        tool = output_schema_name(prompt.task) if self._structured else None
        try:
            body = await self._poster.post(
                self._url, headers=self._headers(), payload=self._payload(prompt, tool)
            )
            return _answer_text(body, tool)
        except ModelOutputError as exc:
            _log.warning("Anthropic %s call failed: %s", prompt.task.value, exc)
            raise

    def _headers(self) -> dict[str, str]:
        headers = {name: value.reveal() for name, value in self._extra.items()}
        headers["x-api-key"] = self._key.reveal()
        return headers

    def _payload(self, prompt: Prompt, tool: str | None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "system": system_text(prompt),
            "messages": [{"role": "user", "content": user_text(prompt)}],
        }
        if self._temperature is not None:
            payload["temperature"] = self._temperature
        if tool is not None:
            payload["tools"] = [
                {
                    "name": tool,
                    "description": _TOOL_DESCRIPTION,
                    "input_schema": output_schema(prompt.task),
                }
            ]
            payload["tool_choice"] = {"type": "tool", "name": tool}
        return payload

    def __repr__(self) -> str:
        return f"AnthropicMessagesModel(base_url={self._base_url!r}, model={self._model!r})"


def _answer_text(body: Any, tool: str | None) -> str:
    """Return the forced tool call's input as JSON text, else the text blocks joined."""
    if not isinstance(body, dict) or body.get("type") == "error":
        msg = "the model endpoint's answer is not a message"
        raise ModelOutputError(msg)
    usage = body.get("usage")
    if isinstance(usage, dict):
        # Reported before the answer is judged: a rejected answer still cost its tokens.
        report_usage(_input_tokens(usage), token_count(usage.get("output_tokens")))
    stop = body.get("stop_reason")
    if isinstance(stop, str) and stop in _UNUSABLE_STOPS:
        raise ModelOutputError(_UNUSABLE_STOPS[stop])
    content = body.get("content")
    if not isinstance(content, list):
        msg = "the model endpoint's answer is not a message"
        raise ModelOutputError(msg)
    blocks = [block for block in content if isinstance(block, dict)]
    for block in blocks:
        if tool is not None and block.get("type") == "tool_use" and block.get("name") == tool:
            return _tool_input(block.get("input"))
    # A model that answered in text despite the forced tool still gets parsed by the core.
    text = "".join(
        block["text"]
        for block in blocks
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    )
    if not text.strip():
        msg = "the model's answer is empty"
        raise ModelOutputError(msg)
    return text


def _input_tokens(usage: dict[str, Any]) -> int | None:
    # Input written to or read from the prompt cache is input all the same; a cache field
    # that is absent or null counts as none.
    total = token_count(usage.get("input_tokens"))
    for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        cached = token_count(usage.get(name) or 0)
        if total is None or cached is None:
            return None
        total += cached
    return total


def _tool_input(value: Any) -> str:
    if not isinstance(value, dict):
        msg = "the model's tool call has no input object"
        raise ModelOutputError(msg)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError) as exc:
        msg = "the model's tool call input cannot be read"
        raise ModelOutputError(msg) from exc
