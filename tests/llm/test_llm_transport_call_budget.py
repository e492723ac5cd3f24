"""One model call, retries included, fits the invocation deadline it runs under.

``timeout_s`` used to bound each attempt only: with the defaults (10 s, two retries, a
Retry-After honoured up to 5 s) one call to a hanging endpoint could take 3 x 10 s + 2 x 5 s =
40 s, twice the default 20 s invocation deadline (``CapabilityLimits.invocation_timeout_s``),
which then returned no results at all instead of the stage's fallback. ``timeout_s`` now bounds
the whole call: every attempt, every backoff and every wait a server asks for. No test here
measures time; each counts the attempts the endpoint saw.
"""

from __future__ import annotations

import inspect

import pytest

from esra.core.config import CapabilityLimits
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import Prompt, build_selection_prompt
from esra.llm import AnthropicMessagesModel, OpenAIChatModel
from tests.core.factories import make_source
from tests.llm._vendors import API_KEY, Reply, VendorServer, openai_answering, openai_error


def _prompt() -> Prompt:
    return build_selection_prompt("annual leave", [make_source("s-1")], model_profile="p")


@pytest.mark.parametrize(
    "constructor", [OpenAIChatModel, OpenAIChatModel.azure, AnthropicMessagesModel]
)
def test_the_default_call_budget_leaves_most_of_the_default_deadline(constructor: object) -> None:
    """A stage that gives up in time falls back; one that outlasts the deadline loses the
    whole invocation. Half the deadline leaves the search and the other stages their room."""
    parameters = inspect.signature(constructor).parameters  # type: ignore[arg-type]
    deadline = CapabilityLimits().invocation_timeout_s
    assert parameters["timeout_s"].default <= deadline / 2


async def test_a_hanging_endpoint_gets_one_attempt_when_it_spends_the_budget() -> None:
    """An attempt that hangs spends the call's whole budget: no retry starts after it."""
    async with (
        VendorServer(openai_answering, Reply(hang=True), Reply(hang=True)) as server,
        OpenAIChatModel(
            f"{server.base_url}/v1", API_KEY, "gpt", timeout_s=0.3, max_retries=2
        ) as model,
    ):
        with pytest.raises(ModelOutputError, match="unavailable") as failed:
            await model.complete(_prompt())
    assert len(server.received) == 1
    assert "TimeoutError" in str(failed.value)


async def test_a_retry_after_beyond_the_budget_gives_up_at_once_with_its_status() -> None:
    """A server asking for a wait the call cannot afford is not waited for."""
    limited = Reply.json(
        openai_error("Rate limit reached", type_="requests"),
        status=429,
        headers=(("Retry-After", "3"),),
    )
    async with (
        VendorServer(openai_answering, limited) as server,
        OpenAIChatModel(
            f"{server.base_url}/v1",
            API_KEY,
            "gpt",
            timeout_s=1.0,
            max_retries=2,
            retry_after_cap_s=5.0,
        ) as model,
    ):
        with pytest.raises(ModelOutputError, match=r"unavailable \(HTTP 429\)"):
            await model.complete(_prompt())
    assert len(server.received) == 1


async def test_fast_transient_failures_are_still_retried_within_the_budget() -> None:
    """A 503 answered at once leaves the budget nearly whole: the retry runs and succeeds."""
    unavailable = Reply.json(openai_error("busy", type_="server_error"), status=503)
    async with (
        VendorServer(openai_answering, unavailable) as server,
        OpenAIChatModel(
            f"{server.base_url}/v1", API_KEY, "gpt", timeout_s=10.0, max_retries=2
        ) as model,
    ):
        assert await model.complete(_prompt())
    assert len(server.received) == 2
