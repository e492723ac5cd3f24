"""OpenAIChatModel against a local server that speaks the chat completions wire format.

The happy paths run the real Retriever; every hostile or failing answer must come back as
the stage's fallback warning, never as an exception out of ``retrieve``.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import stamina

from esra.core.codes import AuditEvent, WarningCode
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import (
    Prompt,
    PromptTask,
    build_selection_prompt,
    output_schema,
    output_schema_name,
)
from esra.llm import OpenAIChatModel
from tests.core.factories import make_source
from tests.llm._pipeline import FALLBACKS, REQUEST, key_free_logs, retrieve, retrieve_record
from tests.llm._pipeline import warning_codes as codes
from tests.llm._vendors import (
    API_KEY,
    Handler,
    Received,
    Reply,
    VendorServer,
    chat_completion,
    closed_port_url,
    openai_answering,
    openai_error,
)

MODEL = "gpt-4.1"
# Every model call of a healthy run: selection, planning for both sources, rerank, answer.
HAPPY_CALLS = 5
# Every model call of the failing runs: selection, planning for the mandatory source only
# (selection fell back), rerank, answer.
CALLS = 4
ALL_FAILED = FALLBACKS | {WarningCode.ESRA_ANSWER_WITHHELD}


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    # Backoff off; the attempts each client asks for still apply (capped, not replaced).
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _model(base_url: str, **options: Any) -> OpenAIChatModel:
    settings: dict[str, Any] = {"timeout_s": 2.0, "max_retries": 1, **options}
    return OpenAIChatModel(f"{base_url}/v1", API_KEY, MODEL, **settings)


def _prompt() -> Prompt:
    return build_selection_prompt(REQUEST, [make_source("s-2")], model_profile="default")


def _task(received: Received) -> PromptTask:
    name = received.json()["response_format"]["json_schema"]["name"]
    return PromptTask(name.removeprefix("esra_"))


def _local_answer(received: Received) -> dict[str, Any]:
    reply = openai_answering(received)
    content = json.loads(reply.body)["choices"][0]["message"]["content"]
    value = json.loads(content)
    assert isinstance(value, dict)
    return value


def _on(task: PromptTask, reply: Callable[[Received], Reply]) -> Handler:
    """Answer ``task`` with ``reply`` and every other task well."""

    def handle(received: Received) -> Reply:
        return reply(received) if _task(received) is task else openai_answering(received)

    return handle


def _content(text: str | None, **fields: Any) -> Callable[[Received], Reply]:
    return lambda _: Reply.json(chat_completion(text, **fields))


def _twisted(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[Received], Reply]:
    """Answer with the well-behaved answer after ``change``."""
    return lambda received: Reply.json(chat_completion(json.dumps(change(_local_answer(received)))))


# --- happy paths -------------------------------------------------------------------------


async def test_every_task_goes_through_the_pipeline_with_its_strict_schema() -> None:
    """Selection, planning, rerank and the answer all come from the endpoint; results return."""
    async with VendorServer(openai_answering) as server, _model(server.base_url) as model:
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert "Annual leave policy" in [r.title for r in response.results]
    assert response.answer is not None
    assert response.answer.citations
    tasks = [_task(r) for r in server.received]
    assert set(tasks) == set(PromptTask)
    for received, task in zip(server.received, tasks, strict=True):
        assert received.method == "POST"
        assert received.path == "/v1/chat/completions"
        assert received.headers["authorization"] == f"Bearer {API_KEY}"
        assert received.headers["content-type"] == "application/json"
        body = received.json()
        assert body["model"] == MODEL
        assert body["temperature"] == 0
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {
                "name": output_schema_name(task),
                "strict": True,
                "schema": output_schema(task),
            },
        }
        assert [m["role"] for m in body["messages"]] == ["system", "user"]


async def test_the_system_section_is_the_system_message_and_the_rest_the_user_turn() -> None:
    """Instructions go in the system slot; request, data and contract follow in order."""
    prompt = _prompt()
    async with VendorServer(openai_answering) as server, _model(server.base_url) as model:
        await model.complete(prompt)
    system, user = server.bodies()[0]["messages"]
    assert system["content"] == prompt.system
    assert f"### SYSTEM\n{system['content']}\n\n{user['content']}" == prompt.render()
    assert user["content"].endswith(prompt.output_contract)


async def test_token_usage_reaches_the_retrieve_audit_record() -> None:
    """Every call's prompt and completion tokens are summed on ``esra.retrieve``."""
    async with VendorServer(openai_answering) as server, _model(server.base_url) as model:
        _, audit = await retrieve(model)
    calls = len(server.received)
    dimensions = retrieve_record(audit).dimensions
    assert dimensions["model_calls"] == calls
    assert dimensions["model_input_tokens"] == 1000 * calls
    assert dimensions["model_output_tokens"] == 50 * calls


async def test_a_rejected_answer_still_counts_its_tokens() -> None:
    """Usage is reported before the answer is judged: a refused answer was still paid for."""
    refusal = _content(None, refusal="I can't help with that.")
    async with (
        VendorServer(_on(PromptTask.RERANK, refusal)) as server,
        _model(server.base_url) as model,
    ):
        response, audit = await retrieve(model)
    assert codes(response) == {WarningCode.ESRA_RERANK_FALLBACK}
    assert retrieve_record(audit).dimensions["model_calls"] == len(server.received)


async def test_garbled_usage_figures_are_not_recorded() -> None:
    """Usage that is not a pair of non-negative integers adds nothing to the audit record."""
    usage = {"prompt_tokens": "many", "completion_tokens": -3}

    def handle(received: Received) -> Reply:
        answer = json.dumps(_local_answer(received))
        return Reply.json(chat_completion(answer, usage=usage))

    async with VendorServer(handle) as server, _model(server.base_url) as model:
        response, audit = await retrieve(model)
    assert response.warnings == ()
    assert "model_calls" not in retrieve_record(audit).dimensions


async def test_without_structured_output_the_contract_text_alone_guides_the_model() -> None:
    """``structured_output=False`` sends no response_format; answers still parse."""
    async with (
        VendorServer(openai_answering) as server,
        _model(server.base_url, structured_output=False) as model,
    ):
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert response.results
    assert all("response_format" not in body for body in server.bodies())


async def test_options_shape_the_request() -> None:
    """No key sends no credential; no temperature omits it; extra headers go along."""
    async with (
        VendorServer(openai_answering) as server,
        OpenAIChatModel(
            server.base_url,
            None,
            "llama3.1:8b",
            temperature=None,
            extra_headers={"X-Gateway-Tenant": "acme"},
        ) as model,
    ):
        await model.complete(_prompt())
    (received,) = server.received
    assert received.path == "/chat/completions"
    assert "authorization" not in received.headers
    assert received.headers["x-gateway-tenant"] == "acme"
    assert "temperature" not in received.json()
    assert received.json()["model"] == "llama3.1:8b"


async def test_azure_uses_the_deployment_path_api_version_and_api_key_header() -> None:
    """Azure OpenAI: deployment in the path, ``api-version`` query, ``api-key`` header."""
    async with (
        VendorServer(openai_answering) as server,
        OpenAIChatModel.azure(
            server.base_url, "esra prod", API_KEY, api_version="2024-10-21"
        ) as model,
    ):
        await model.complete(_prompt())
    (received,) = server.received
    assert received.path == "/openai/deployments/esra%20prod/chat/completions"
    assert received.query == {"api-version": "2024-10-21"}
    assert received.headers["api-key"] == API_KEY
    assert "authorization" not in received.headers
    assert received.json()["model"] == "esra prod"


# --- hostile and malformed answers -------------------------------------------------------

_TRUNCATED = '{"queries": [{"mapping": "m-s-1", "strategy": "keyword", "optional_terms": ["lea'

HOSTILE = {
    "prose instead of JSON": (
        PromptTask.SELECT_SOURCES,
        _content("Sure! You should search the HR source."),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "refusal": (
        PromptTask.SELECT_SOURCES,
        _content(None, refusal="I'm sorry, I can't help with that."),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "empty content": (
        PromptTask.SELECT_SOURCES,
        _content(""),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "truncated JSON": (
        PromptTask.PLAN_SEARCHES,
        _content(_TRUNCATED),
        WarningCode.ESRA_PLANNING_FALLBACK,
    ),
    "cut off at the token limit": (
        PromptTask.RERANK,
        _content('{"scores": [{"id": "r_', finish_reason="length"),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "content filtered": (
        PromptTask.RERANK,
        _content(None, finish_reason="content_filter"),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "keys outside the contract": (
        PromptTask.RERANK,
        _twisted(lambda a: {**a, "note": "ignore the other results"}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "foreign result ids": (
        PromptTask.RERANK,
        _twisted(lambda _: {"scores": [{"id": "r_forged", "score": 1.0}]}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "oversized rerank array": (
        PromptTask.RERANK,
        _twisted(lambda _: {"scores": [{"id": f"r_{i}", "score": 1.0} for i in range(201)]}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "oversized plan": (
        PromptTask.PLAN_SEARCHES,
        _twisted(lambda a: {"queries": a["queries"] * 21}),
        WarningCode.ESRA_PLANNING_FALLBACK,
    ),
    "no choices": (
        PromptTask.RERANK,
        lambda _: Reply.json({**chat_completion("{}"), "choices": []}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "content parts instead of text": (
        PromptTask.PLAN_SEARCHES,
        lambda _: Reply.json(chat_completion([{"type": "text", "text": "{}"}])),  # type: ignore[arg-type]
        WarningCode.ESRA_PLANNING_FALLBACK,
    ),
    "HTML page with status 200": (
        PromptTask.PLAN_SEARCHES,
        lambda _: Reply(body=b"<html><body>Login required</body></html>", content_type="text/html"),
        WarningCode.ESRA_PLANNING_FALLBACK,
    ),
    "error body with status 200": (
        PromptTask.SELECT_SOURCES,
        lambda _: Reply.json(openai_error("upstream failed", type_="server_error")),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "a bad answer": (
        PromptTask.ANSWER,
        _twisted(lambda _: {"answer": "See [r_forged].", "citations": ["r_forged"]}),
        WarningCode.ESRA_ANSWER_WITHHELD,
    ),
}


@pytest.mark.parametrize(("task", "reply", "warning"), HOSTILE.values(), ids=list(HOSTILE))
async def test_a_hostile_or_malformed_answer_is_the_stages_fallback(
    task: PromptTask, reply: Callable[[Received], Reply], warning: WarningCode
) -> None:
    """Only the stage that got the bad answer falls back; results still come back."""
    async with VendorServer(_on(task, reply)) as server, _model(server.base_url) as model:
        response, _ = await retrieve(model)
    assert codes(response) == {warning}
    assert response.results


async def test_source_ids_the_model_invents_are_dropped_and_audited() -> None:
    """A selection naming unknown sources selects nothing extra and is audited, not warned."""
    reply = _twisted(lambda _: {"sources": ["s-secret", "s-2"]})
    async with (
        VendorServer(_on(PromptTask.SELECT_SOURCES, reply)) as server,
        _model(server.base_url) as model,
    ):
        response, audit = await retrieve(model)
    assert response.warnings == ()
    assert len(audit.events(AuditEvent.LLM_UNKNOWN_SOURCE_REJECTED)) == 1


_VALID = '{"sources": ["s-2"]}'
UNUSABLE = {
    "refusal beside content": chat_completion(_VALID, refusal="I can't help with that."),
    "length despite complete content": chat_completion(_VALID, finish_reason="length"),
    "content_filter": chat_completion(_VALID, finish_reason="content_filter"),
    "choice without a message": {**chat_completion(_VALID), "choices": [{"index": 0}]},
    "a JSON array": [chat_completion(_VALID)],
}


@pytest.mark.parametrize("body", UNUSABLE.values(), ids=list(UNUSABLE))
async def test_an_unusable_completion_raises_model_output_error(body: Any) -> None:
    """Each of these is refused by the client itself, before the core sees any text."""
    async with VendorServer(lambda _: Reply.json(body)) as server, _model(server.base_url) as model:
        with pytest.raises(ModelOutputError):
            await model.complete(_prompt())


async def test_the_content_comes_back_unchanged() -> None:
    """The adapter only transports: the first choice's content is returned as it came."""
    fenced = f"```json\n{_VALID}\n```"
    async with (
        VendorServer(lambda _: Reply.json(chat_completion(fenced))) as server,
        _model(server.base_url) as model,
    ):
        assert await model.complete(_prompt()) == fenced


# --- transport failures ------------------------------------------------------------------


async def test_a_server_error_then_success_is_retried() -> None:
    """A 500 is transient: the next attempt succeeds and nothing falls back."""
    error = Reply.json(openai_error("The server had an error", type_="server_error"), status=500)
    async with VendorServer(openai_answering, error) as server, _model(server.base_url) as model:
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert len(server.received) == HAPPY_CALLS + 1


async def test_a_rate_limit_with_retry_after_is_retried() -> None:
    """A 429 with Retry-After is waited out (up to the cap) and retried."""
    limited = Reply.json(
        openai_error("Rate limit reached", type_="requests", code="rate_limit_exceeded"),
        status=429,
        headers=(("Retry-After", "1"),),
    )
    async with VendorServer(openai_answering, limited) as server, _model(server.base_url) as model:
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert len(server.received) == HAPPY_CALLS + 1


_FULL = json.dumps(chat_completion('{"sources": []}')).encode()

FAILURES = {
    "HTML 502 page": (
        Reply(status=502, body=b"<html><h1>502 Bad Gateway</h1></html>", content_type="text/html"),
        2,
    ),
    "503 JSON error": (Reply.json(openai_error("Overloaded", type_="server_error"), status=503), 2),
    "401 (not retried)": (
        Reply.json(
            openai_error(f"Incorrect API key provided: {API_KEY}.", type_="invalid_request_error"),
            status=401,
        ),
        1,
    ),
    "400 (not retried)": (
        Reply.json(openai_error("Invalid schema", type_="invalid_request_error"), status=400),
        1,
    ),
    "response cut short": (Reply(body=_FULL, cut_after=len(_FULL) // 2), 2),
    "oversized body (not retried)": (Reply(body=b" " * (4 * 1024 * 1024 + 1)), 1),
}


@pytest.mark.parametrize(("reply", "attempts"), FAILURES.values(), ids=list(FAILURES))
async def test_an_endpoint_failure_is_every_stages_fallback(
    reply: Reply, attempts: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Transient failures are retried once, others not; every stage then falls back."""
    caplog.set_level(logging.DEBUG)
    async with VendorServer(lambda _: reply) as server, _model(server.base_url) as model:
        response, _ = await retrieve(model)
    assert codes(response) == ALL_FAILED
    assert "Annual leave policy" in [r.title for r in response.results]
    assert len(server.received) == CALLS * attempts
    assert key_free_logs(caplog, API_KEY)


async def test_a_refused_connection_is_every_stages_fallback() -> None:
    """Nothing listening: every stage falls back, and the search still answers."""
    async with _model(closed_port_url()) as model:
        response, _ = await retrieve(model)
    assert codes(response) == ALL_FAILED
    assert response.results


async def test_a_server_slower_than_the_timeout_is_every_stages_fallback() -> None:
    """An endpoint that never answers is cut off at ``timeout_s`` per attempt."""
    async with (
        VendorServer(lambda _: Reply(hang=True)) as server,
        _model(server.base_url, timeout_s=0.2, max_retries=0) as model,
    ):
        response, _ = await retrieve(model)
    assert codes(response) == ALL_FAILED
    assert response.results
    assert len(server.received) == CALLS


# --- the credential ----------------------------------------------------------------------


LEAKY = {
    "401 echoing the key": Reply.json(
        openai_error(f"Incorrect API key provided: {API_KEY}", type_="invalid_request_error"),
        status=401,
    ),
    "500 page echoing the key": Reply(
        status=500,
        body=f"<pre>Authorization: Bearer {API_KEY}</pre>".encode(),
        content_type="text/html",
    ),
    "answer echoing the key": Reply.json(
        chat_completion(f"your key is {API_KEY}", finish_reason="length")
    ),
}


@pytest.mark.parametrize("reply", LEAKY.values(), ids=list(LEAKY))
async def test_the_key_never_appears_in_errors_logs_or_repr(
    reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    """Not in the exception chain, not in any log record (httpx's debug logs included)."""
    caplog.set_level(logging.DEBUG)
    async with VendorServer(lambda _: reply) as server, _model(server.base_url) as model:
        with pytest.raises(ModelOutputError) as raised:
            await model.complete(_prompt())
        assert API_KEY not in repr(model)
    assert API_KEY not in "".join(traceback.format_exception(raised.value))
    assert key_free_logs(caplog, API_KEY)


def test_an_unusable_key_is_refused_without_quoting_it() -> None:
    """A key with a line break would corrupt the request; the error does not quote it."""
    with pytest.raises(ValueError, match="credential") as raised:
        OpenAIChatModel("http://127.0.0.1:1/v1", f"{API_KEY}\r\nX-Evil: 1", MODEL)
    assert API_KEY not in str(raised.value)


@pytest.mark.parametrize(
    "base_url",
    [
        "ftp://127.0.0.1/v1",
        f"https://user:{API_KEY}@api.openai.com/v1",
        "https://h/v1?key=1",
        "/v1",
    ],
)
def test_a_base_url_with_credentials_a_query_or_no_host_is_refused(base_url: str) -> None:
    """The key belongs in its header, and the base URL must name an http(s) host."""
    with pytest.raises(ValueError, match="base_url") as raised:
        OpenAIChatModel(base_url, API_KEY, MODEL)
    assert API_KEY not in str(raised.value)


# --- lifecycle ---------------------------------------------------------------------------


async def test_the_client_closes_its_own_http_client_but_not_the_hosts() -> None:
    """``aclose`` (or leaving ``async with``) closes what the model made, nothing else."""
    async with VendorServer(openai_answering) as server, httpx.AsyncClient() as shared:
        async with _model(server.base_url, http_client=shared) as model:
            assert await model.complete(_prompt())
        assert not shared.is_closed
        owned = _model(server.base_url)
        await owned.aclose()
        assert owned._poster._client.is_closed
