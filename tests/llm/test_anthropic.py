"""AnthropicMessagesModel against a local server that speaks the Messages API wire format.

The happy paths run the real Retriever; every hostile or failing answer must come back as
the stage's fallback warning, never as an exception out of ``retrieve``.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import stamina

from esra.core.codes import WarningCode
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import (
    Prompt,
    PromptTask,
    build_selection_prompt,
    output_schema,
    output_schema_name,
)
from esra.llm import AnthropicMessagesModel
from tests.core.factories import make_source
from tests.llm._pipeline import FALLBACKS, REQUEST, key_free_logs, retrieve, retrieve_record
from tests.llm._pipeline import warning_codes as codes
from tests.llm._vendors import (
    API_KEY,
    Handler,
    Received,
    Reply,
    VendorServer,
    anthropic_answering,
    anthropic_error,
    anthropic_message,
    closed_port_url,
    text_block,
    tool_use,
)

MODEL = "claude-sonnet-4-5"
# Every model call of a healthy run: selection, planning for both sources, rerank, answer.
HAPPY_CALLS = 5
# Every model call of a failing run: selection, planning for the mandatory source, rerank,
# answer.
CALLS = 4
ALL_FAILED = FALLBACKS | {WarningCode.ESRA_ANSWER_WITHHELD}


@pytest.fixture(autouse=True)
def _no_backoff() -> Iterator[None]:
    # Backoff off; the attempts each client asks for still apply (capped, not replaced).
    with stamina.set_testing(True, attempts=100, cap=True):
        yield


def _model(base_url: str, **options: Any) -> AnthropicMessagesModel:
    settings: dict[str, Any] = {"timeout_s": 2.0, "max_retries": 1, **options}
    return AnthropicMessagesModel(API_KEY, MODEL, base_url=base_url, **settings)


def _prompt() -> Prompt:
    return build_selection_prompt(REQUEST, [make_source("s-2")], model_profile="default")


def _task(received: Received) -> PromptTask:
    return PromptTask(received.json()["tool_choice"]["name"].removeprefix("esra_"))


def _on(task: PromptTask, reply: Callable[[Received], Reply]) -> Handler:
    """Answer ``task`` with ``reply`` and every other task well."""

    def handle(received: Received) -> Reply:
        return reply(received) if _task(received) is task else anthropic_answering(received)

    return handle


def _message(content: list[dict[str, Any]], **fields: Any) -> Callable[[Received], Reply]:
    return lambda _: Reply.json(anthropic_message(content, **fields))


def _tool_input(value: Any, **fields: Any) -> Callable[[Received], Reply]:
    """Answer by calling the requested tool with ``value`` as its input."""
    return lambda received: Reply.json(
        anthropic_message(
            [tool_use(received.json()["tool_choice"]["name"], value)],
            **{"stop_reason": "tool_use", **fields},
        )
    )


# --- happy paths -------------------------------------------------------------------------


async def test_every_task_goes_through_the_pipeline_as_a_forced_tool_call() -> None:
    """Each task's schema is the one tool's input schema, and the model must call it."""
    async with VendorServer(anthropic_answering) as server, _model(server.base_url) as model:
        response, audit = await retrieve(model)
    assert response.warnings == ()
    assert "Annual leave policy" in [r.title for r in response.results]
    assert response.answer is not None
    tasks = [_task(r) for r in server.received]
    assert set(tasks) == set(PromptTask)
    assert len(tasks) == HAPPY_CALLS
    for received, task in zip(server.received, tasks, strict=True):
        assert received.path == "/v1/messages"
        assert received.headers["x-api-key"] == API_KEY
        assert received.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in received.headers
        body = received.json()
        assert body["model"] == MODEL
        assert body["temperature"] == 0
        assert body["max_tokens"] == 4096
        (tool,) = body["tools"]
        assert tool["name"] == output_schema_name(task)
        assert tool["input_schema"] == output_schema(task)
        assert body["tool_choice"] == {"type": "tool", "name": output_schema_name(task)}
        assert [m["role"] for m in body["messages"]] == ["user"]
    dimensions = retrieve_record(audit).dimensions
    # Input tokens count cache writes and reads too: 900 + 60 + 40 per call.
    assert dimensions["model_input_tokens"] == 1000 * HAPPY_CALLS
    assert dimensions["model_output_tokens"] == 50 * HAPPY_CALLS
    assert dimensions["model_calls"] == HAPPY_CALLS


async def test_the_system_section_is_the_system_field_and_the_rest_the_user_turn() -> None:
    """Instructions go in ``system``; request, data and contract follow in order."""
    prompt = _prompt()
    async with VendorServer(anthropic_answering) as server, _model(server.base_url) as model:
        await model.complete(prompt)
    body = server.bodies()[0]
    assert body["system"] == prompt.system
    user = body["messages"][0]["content"]
    assert f"### SYSTEM\n{body['system']}\n\n{user}" == prompt.render()


async def test_without_structured_output_the_text_answer_is_used() -> None:
    """``structured_output=False`` offers no tool; the text blocks are the answer."""
    async with (
        VendorServer(anthropic_answering) as server,
        _model(server.base_url, structured_output=False) as model,
    ):
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert response.results
    assert all("tools" not in body and "tool_choice" not in body for body in server.bodies())


async def test_a_text_answer_despite_the_forced_tool_is_still_parsed() -> None:
    """A server that ignores tool_choice and answers in text still gets its answer parsed."""
    text = _message([text_block('{"sources": ["s-2"]}')])
    async with (
        VendorServer(_on(PromptTask.SELECT_SOURCES, text)) as server,
        _model(server.base_url) as model,
    ):
        response, _ = await retrieve(model)
    assert response.warnings == ()


async def test_options_shape_the_request() -> None:
    """Version, token limit, temperature and extra headers are sent as configured."""
    async with (
        VendorServer(anthropic_answering) as server,
        _model(
            f"{server.base_url}/",
            anthropic_version="2024-01-01",
            max_tokens=512,
            temperature=None,
            extra_headers={"anthropic-beta": "token-efficient-tools-2025-02-19"},
        ) as model,
    ):
        await model.complete(_prompt())
    (received,) = server.received
    assert received.path == "/v1/messages"
    assert received.headers["anthropic-version"] == "2024-01-01"
    assert received.headers["anthropic-beta"] == "token-efficient-tools-2025-02-19"
    body = received.json()
    assert body["max_tokens"] == 512
    assert "temperature" not in body


# --- hostile and malformed answers -------------------------------------------------------

HOSTILE = {
    "stopped at max_tokens": (
        PromptTask.PLAN_SEARCHES,
        _tool_input({"queries": []}, stop_reason="max_tokens"),
        WarningCode.ESRA_PLANNING_FALLBACK,
    ),
    "refusal": (
        PromptTask.SELECT_SOURCES,
        _message([], stop_reason="refusal"),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "prose instead of the tool": (
        PromptTask.SELECT_SOURCES,
        _message([text_block("I think the HR source fits best.")]),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "no content blocks": (
        PromptTask.RERANK,
        _message([]),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "tool input that is not an object": (
        PromptTask.RERANK,
        _tool_input("scores: all 1.0"),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "keys outside the contract": (
        PromptTask.RERANK,
        _tool_input({"scores": [], "instructions": "rank r_1 first"}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "foreign result ids": (
        PromptTask.RERANK,
        _tool_input({"scores": [{"id": "r_forged", "score": 1.0}]}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "oversized array": (
        PromptTask.RERANK,
        _tool_input({"scores": [{"id": f"r_{i}", "score": 0.5} for i in range(201)]}),
        WarningCode.ESRA_RERANK_FALLBACK,
    ),
    "another tool's call": (
        PromptTask.PLAN_SEARCHES,
        _message([tool_use("run_sql", {"sql": "SELECT * FROM payroll"})], stop_reason="tool_use"),
        WarningCode.ESRA_PLANNING_FALLBACK,
    ),
    "error body with status 200": (
        PromptTask.SELECT_SOURCES,
        lambda _: Reply.json(anthropic_error("api_error", "Internal server error")),
        WarningCode.ESRA_SELECTION_FALLBACK,
    ),
    "a bad answer": (
        PromptTask.ANSWER,
        _tool_input({"answer": "Trust me.", "citations": []}),
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


_VALID = {"sources": ["s-2"]}
UNUSABLE = {
    "max_tokens despite a complete input": anthropic_message(
        [tool_use("esra_select_sources", _VALID)], stop_reason="max_tokens"
    ),
    "refusal despite an input": anthropic_message(
        [tool_use("esra_select_sources", _VALID)], stop_reason="refusal"
    ),
    "pause_turn": anthropic_message(
        [tool_use("esra_select_sources", _VALID)], stop_reason="pause_turn"
    ),
    "error object": anthropic_error("overloaded_error", "Overloaded"),
    "content that is not a list": {**anthropic_message([]), "content": "{}"},
    "a JSON array": [anthropic_message([tool_use("esra_select_sources", _VALID)])],
}


@pytest.mark.parametrize("body", UNUSABLE.values(), ids=list(UNUSABLE))
async def test_an_unusable_message_raises_model_output_error(body: Any) -> None:
    """Each of these is refused by the client itself, before the core sees any text."""
    async with VendorServer(lambda _: Reply.json(body)) as server, _model(server.base_url) as model:
        with pytest.raises(ModelOutputError):
            await model.complete(_prompt())


async def test_the_tool_input_comes_back_as_json_text() -> None:
    """The forced tool call's input object is the answer, serialized for the core's parser."""
    reply = Reply.json(
        anthropic_message(
            [text_block("Calling the tool."), tool_use("esra_select_sources", _VALID)],
            stop_reason="tool_use",
        )
    )
    async with VendorServer(lambda _: reply) as server, _model(server.base_url) as model:
        assert json.loads(await model.complete(_prompt())) == _VALID


# --- transport failures ------------------------------------------------------------------

_OVERLOADED = Reply.json(anthropic_error("overloaded_error", "Overloaded"), status=529)


async def test_overloaded_then_success_is_retried() -> None:
    """529 ``overloaded_error`` is transient: the next attempt succeeds."""
    async with (
        VendorServer(anthropic_answering, _OVERLOADED) as server,
        _model(server.base_url) as model,
    ):
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert len(server.received) == HAPPY_CALLS + 1


async def test_a_rate_limit_with_retry_after_is_retried() -> None:
    """429 ``rate_limit_error`` with Retry-After is waited out (up to the cap) and retried,
    when the call's budget (``timeout_s``, retries included) has room for the wait."""
    limited = Reply.json(
        anthropic_error("rate_limit_error", "Number of request tokens has exceeded your limit."),
        status=429,
        headers=(("retry-after", "2"),),
    )
    async with (
        VendorServer(anthropic_answering, limited) as server,
        _model(server.base_url, timeout_s=10.0) as model,
    ):
        response, _ = await retrieve(model)
    assert response.warnings == ()
    assert len(server.received) == HAPPY_CALLS + 1


FAILURES = {
    "529 overloaded": (_OVERLOADED, 2),
    "500 api_error": (Reply.json(anthropic_error("api_error", "Internal"), status=500), 2),
    "401 authentication_error (not retried)": (
        Reply.json(
            anthropic_error("authentication_error", f"invalid x-api-key: {API_KEY}"), status=401
        ),
        1,
    ),
    "400 invalid_request_error (not retried)": (
        Reply.json(anthropic_error("invalid_request_error", "tools.0: bad schema"), status=400),
        1,
    ),
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
    assert response.results
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
    assert len(server.received) == CALLS


# --- the credential ----------------------------------------------------------------------


async def test_the_key_never_appears_in_errors_logs_or_repr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An error body quoting the key leaves no trace of it in the exception or the logs."""
    caplog.set_level(logging.DEBUG)
    echo = Reply.json(
        anthropic_error("permission_error", f"key {API_KEY} may not use this model"), status=403
    )
    async with VendorServer(lambda _: echo) as server, _model(server.base_url) as model:
        with pytest.raises(ModelOutputError) as raised:
            await model.complete(_prompt())
        assert API_KEY not in repr(model)
    assert API_KEY not in "".join(traceback.format_exception(raised.value))
    assert key_free_logs(caplog, API_KEY)
