"""A prompt that is not Unicode text: refused at the core's entry, never a failed search.

A caller's prompt may hold a lone surrogate (JSON spells one ``"\\ud800"``), which no UTF-8
text can carry: the result cache hashed the prompt's UTF-8 form, which does not exist, and
the whole invocation ended ``ESRA_INTERNAL`` as soon as the cache was on (the model request
and the audit record would fail the same way). The MCP host refuses such an argument; the
core's own entry refuses it too, and the cache key of any other text with one still forms.
"""

from __future__ import annotations

import pytest

from esra.core._pipeline.cache_keys import prompt_fingerprint
from esra.core.codes import ErrorCode
from esra.core.exceptions import InvalidRequestError
from tests.core.test_result_cache import A, _ctx, _world


def test_texts_with_different_lone_surrogates_have_different_fingerprints() -> None:
    assert prompt_fingerprint("leave \ud800") != prompt_fingerprint("leave \ud801")
    assert prompt_fingerprint("leave \ud800") != prompt_fingerprint("leave \ufffd")


async def test_a_prompt_with_a_lone_surrogate_is_an_invalid_request() -> None:
    world = _world()
    with pytest.raises(InvalidRequestError) as refused:
        await world.retrievers[A].retrieve(_ctx(A), "leave \ud800 policy")
    assert refused.value.code is ErrorCode.ESRA_INVALID_REQUEST
    assert world.providers[A].calls == 0
