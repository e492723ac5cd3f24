"""An Azure deployment name is one path segment: it never moves the request elsewhere.

``quote(deployment, safe="")`` escapes ``/``, ``?`` and ``#``, but leaves ``.`` alone, and
httpx resolves dot segments: a deployment named ``..`` posted the prompt and the key to
``{endpoint}/openai/chat/completions`` and one named ``.`` to
``{endpoint}/openai/deployments/chat/completions``, paths no deployment has.
"""

from __future__ import annotations

import httpx
import pytest

from esra.core.exceptions import ModelOutputError
from esra.core.prompts import build_selection_prompt
from esra.llm import OpenAIChatModel
from tests.core.factories import make_source


@pytest.mark.parametrize("deployment", [".", ".."])
def test_a_dot_segment_deployment_is_refused(deployment: str) -> None:
    with pytest.raises(ValueError, match="deployment"):
        OpenAIChatModel.azure(
            "https://r.openai.azure.com", deployment, "k", api_version="2024-10-21"
        )


@pytest.mark.parametrize("deployment", ["gpt-4o", "a..b", "../x", "a/../../b", "..."])
async def test_any_other_deployment_stays_under_its_own_path(deployment: str) -> None:
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path.decode())
        # A redirect: refused unread, so the test needs no body.
        return httpx.Response(307, headers={"location": "https://elsewhere.example/"})

    prompt = build_selection_prompt("annual leave", [make_source("s-1")], model_profile="p")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = OpenAIChatModel.azure(
            "https://r.openai.azure.com",
            deployment,
            "k",
            api_version="2024-10-21",
            http_client=client,
        )
        with pytest.raises(ModelOutputError, match="redirect"):
            await model.complete(prompt)
    [path] = paths
    assert path.startswith("/openai/deployments/")
    assert path.split("?")[0].endswith("/chat/completions")
    assert path.split("?")[0].count("/") == 5
