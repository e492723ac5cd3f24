"""OpenAIChatModel: the LanguageModel port over an OpenAI-compatible chat completions API.

One client speaks to OpenAI, Azure OpenAI, vLLM, Ollama and the llama.cpp server: they all
serve ``POST {base_url}/chat/completions``. The task's output contract goes along as a
strict JSON-schema ``response_format`` unless the server lacks it; the answer text comes
back raw, for the core to parse and validate.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

import httpx

from esra.core.exceptions import ModelOutputError
from esra.core.prompts import Prompt, output_schema, output_schema_name
from esra.llm._http import JsonPoster, Secret, checked_headers, endpoint_url
from esra.llm._remote import RemoteModelClient
from esra.llm._wire import report_usage, system_text, token_count, user_text

__all__ = ["OpenAIChatModel"]

_log = logging.getLogger("esra.llm")


class OpenAIChatModel(RemoteModelClient):
    """Complete ESRA's prompts with an OpenAI-compatible chat completions endpoint.

    The system section becomes the system message; the request, reference data and output
    contract become one user message, in that order. With ``structured_output`` the task's
    JSON Schema (``esra.core.prompts.output_schema``) is sent as a strict ``json_schema``
    response format, so a capable server can only produce the contract's shape; without it
    the model relies on the contract text in the prompt. Either way the core parses every
    answer. A refusal, an empty answer, ``finish_reason`` ``length`` or ``content_filter``,
    a body that is not a chat completion, a refused request (4xx other than 429) or an
    endpoint still unavailable after the retries raises ``ModelOutputError``, which the
    calling stage turns into its fallback warning. Token usage is reported to the
    invocation's audit record (``esra.core._model_usage``).

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``,
            ``http://127.0.0.1:8000/v1`` (vLLM), ``http://127.0.0.1:11434/v1`` (Ollama),
            ``http://127.0.0.1:8080/v1`` (llama.cpp); for Azure see ``azure()``.
        api_key: the key the host resolved (from its ``SecretStore``); never logged or shown
            by ``repr``. ``None`` sends no credential (a local server without auth).
        model: the model name sent in every request (on Azure, the deployment).
        timeout_s: bound on the whole call: every attempt (response body included),
            backoff and Retry-After wait. The default, 10 s, is half the default
            invocation deadline (20 s), so a stage that gives up still leaves the
            search and the other stages their time.
        max_retries: further attempts after a transient failure (429, 5xx, connection
            error, timeout); 0 disables retries.
        api_version: sent as the ``api-version`` query parameter (Azure OpenAI).
        auth: ``"bearer"`` sends ``Authorization: Bearer <key>``; ``"api-key"`` sends the
            ``api-key`` header Azure OpenAI expects.
        structured_output: send the task's JSON Schema as a strict response format; turn
            off for servers that reject ``response_format`` ``json_schema``.
        temperature: sent as ``temperature`` (0 by default, for repeatable answers);
            ``None`` omits it, for models that refuse the parameter.
        extra_headers: further headers for every request (a gateway's routing or tenant
            header); values are treated as secrets too.
        retry_after_cap_s: the longest a server's Retry-After is honoured for.
        http_client: a host-owned ``httpx.AsyncClient`` (proxy, private CA, mTLS); the
            model then does not close it.
        allow_insecure_http: allow a plain ``http://`` base URL to a host other than
            this machine's loopback, which sends the key and the prompts in
            cleartext; without it such a URL is a ``ValueError``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        *,
        timeout_s: float = 10.0,
        max_retries: int = 2,
        api_version: str | None = None,
        auth: Literal["bearer", "api-key"] = "bearer",
        structured_output: bool = True,
        temperature: float | None = 0.0,
        extra_headers: Mapping[str, str] | None = None,
        retry_after_cap_s: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
        allow_insecure_http: bool = False,
    ) -> None:
        if not model:
            msg = "model must name the model (or the Azure deployment)"
            raise ValueError(msg)
        if auth not in ("bearer", "api-key"):
            msg = "auth must be 'bearer' or 'api-key'"
            raise ValueError(msg)
        self._base_url = base_url
        self._url = endpoint_url(
            base_url, "/chat/completions", allow_insecure_http=allow_insecure_http
        )
        self._key = Secret(api_key) if api_key is not None else None
        self._auth = auth
        self._model = model
        self._params = {"api-version": api_version} if api_version else None
        self._structured = structured_output
        self._temperature = temperature
        self._extra = checked_headers(extra_headers)
        self._poster = JsonPoster(
            timeout_s=timeout_s,
            max_retries=max_retries,
            retry_after_cap_s=retry_after_cap_s,
            http_client=http_client,
        )

    @classmethod
    def azure(
        cls,
        endpoint: str,
        deployment: str,
        api_key: str,
        *,
        api_version: str,
        timeout_s: float = 10.0,
        max_retries: int = 2,
        structured_output: bool = True,
        temperature: float | None = 0.0,
        extra_headers: Mapping[str, str] | None = None,
        retry_after_cap_s: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
        allow_insecure_http: bool = False,
    ) -> OpenAIChatModel:
        """Return a client for an Azure OpenAI deployment.

        Posts to ``{endpoint}/openai/deployments/{deployment}/chat/completions`` with the
        ``api-version`` query parameter and the ``api-key`` header.

        Args:
            endpoint: the resource endpoint, e.g. ``https://my-resource.openai.azure.com``.
            deployment: the deployment name.
            api_key: the resource key the host resolved.
            api_version: a chat completions API version that supports structured outputs,
                e.g. ``2024-10-21``.

        The other arguments are the constructor's.
        """
        if deployment in {".", ".."}:
            # quote() leaves dots alone and the URL resolves them: the request (key and
            # prompt) would go to another path of the endpoint than any deployment's.
            msg = "deployment must name a deployment, not a dot segment"
            raise ValueError(msg)
        base = f"{endpoint.rstrip('/')}/openai/deployments/{quote(deployment, safe='')}"
        return cls(
            base,
            api_key,
            deployment,
            timeout_s=timeout_s,
            max_retries=max_retries,
            api_version=api_version,
            auth="api-key",
            structured_output=structured_output,
            temperature=temperature,
            extra_headers=extra_headers,
            retry_after_cap_s=retry_after_cap_s,
            http_client=http_client,
            allow_insecure_http=allow_insecure_http,
        )

    async def complete(self, prompt: Prompt) -> str:
        """Return the model's raw answer text to ``prompt``.

        Raises:
            ModelOutputError: no usable answer (see the class docstring).
        """
        try:
            body = await self._poster.post(
                self._url,
                headers=self._headers(),
                payload=self._payload(prompt),
                params=self._params,
            )
            return _answer_text(body)
        except ModelOutputError as exc:
            _log.warning("OpenAI-compatible %s call failed: %s", prompt.task.value, exc)
            raise

    def _headers(self) -> dict[str, str]:
        headers = {name: value.reveal() for name, value in self._extra.items()}
        if self._key is not None:
            if self._auth == "api-key":
                headers["api-key"] = self._key.reveal()
            else:
                headers["Authorization"] = f"Bearer {self._key.reveal()}"
        return headers

    def _payload(self, prompt: Prompt) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": system_text(prompt)},
                {"role": "user", "content": user_text(prompt)},
            ],
        }
        if self._temperature is not None:
            payload["temperature"] = self._temperature
        if self._structured:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": output_schema_name(prompt.task),
                    "strict": True,
                    "schema": output_schema(prompt.task),
                },
            }
        return payload

    def __repr__(self) -> str:
        return f"OpenAIChatModel(base_url={self._base_url!r}, model={self._model!r})"


def _answer_text(body: Any) -> str:
    """Return the first choice's content, after reporting the usage the body states."""
    if not isinstance(body, dict):
        msg = "the model endpoint's answer is not a chat completion"
        raise ModelOutputError(msg)
    usage = body.get("usage")
    if isinstance(usage, dict):
        # Reported before the answer is judged: a rejected answer still cost its tokens.
        report_usage(
            token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens"))
        )
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        msg = "the model endpoint's answer is not a chat completion"
        raise ModelOutputError(msg)
    if message.get("refusal"):
        msg = "the model refused to answer"
        raise ModelOutputError(msg)
    finish = choice.get("finish_reason")
    if finish == "length":
        msg = "the model's answer was cut off at its token limit"
        raise ModelOutputError(msg)
    if finish == "content_filter":
        msg = "the model's answer was withheld by a content filter"
        raise ModelOutputError(msg)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        msg = "the model's answer is empty"
        raise ModelOutputError(msg)
    return content
