"""Hostile model answers and hostile record text against the output contracts and markers.

Every answer a model gives, and every record a source holds, is untrusted: whatever they
contain, a parser either returns the contract's shape or raises ``ModelOutputError`` (so the
stage falls back with its warning), and preparing a record for a prompt costs work in
proportion to its size — one hostile answer or record must never stall the runtime.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._pipeline.answer import compose_answer
from esra.core._pipeline.rerank import RankedCandidate
from esra.core._pipeline.respond import respond
from esra.core._pipeline.scope import EffectiveScope
from esra.core._prompts import markers
from esra.core._text_normalisation import fold
from esra.core.config import ResponseMode
from esra.core.exceptions import ModelOutputError
from esra.core.prompts import (
    Prompt,
    PromptTask,
    parse_plan,
    parse_rerank,
    parse_selection,
    strip_markers,
)
from esra.core.testing import FakeLanguageModel, InMemoryAuditSink
from esra.core.testing._invocations import audited_in_scope
from tests.core._ranking_fixtures import candidate, mapping, ranked
from tests.core.factories import (
    make_capability,
    make_context,
    make_scope,
    make_scoped,
    make_source,
)

_FOLDED_TOKEN = re.compile(r"(?i)esra[\s_-]*data")
# A watchdog for the test below, whose failure mode is running (practically) forever:
# the fixed code finishes in well under a second, the broken one would take hours or years.
_WATCHDOG_S = 120


def _finishes(code: str) -> str:
    """Run ``code`` in a fresh interpreter and return its output; fail if it never ends."""
    try:
        # The interpreter running the tests, on a fixed script of this file's own.
        done = subprocess.run(  # noqa: S603
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=_WATCHDOG_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the parser did not finish on a hostile input")
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- the contract parsers -------------------------------------------------------------------


def test_a_fenced_answer_padded_with_whitespace_is_parsed_without_backtracking() -> None:
    """An answer opening a code fence and then nothing but whitespace (200,000 characters,
    inside the raw-answer cap) is refused like any unreadable answer; unwrapping the fence
    must not try every way of splitting the whitespace (cubic in its length), which would
    hold the event loop — every tenant's invocations — for as long as it ran."""
    out = _finishes(
        """
        from esra.core.exceptions import ModelOutputError
        from esra.core.prompts import parse_selection
        for text in ("```" + " " * 199_990 + "x", "```json" + "\\n" * 199_980 + "```x"):
            try:
                parse_selection(text)
            except ModelOutputError:
                print("refused")
        """
    )
    assert out.split() == ["refused", "refused"]


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"sources": ["s-1"]}\n```',
        '```\n{"sources": ["s-1"]}\n```',
        '  ```json{"sources": ["s-1"]}```  ',
        '\n{"sources": ["s-1"]}\n',
    ],
)
def test_a_fenced_or_padded_answer_still_parses(text: str) -> None:
    assert parse_selection(text) == ("s-1",)


@pytest.mark.parametrize(
    "text",
    [
        'Here you go: {"sources": ["s-1"]}',
        '{"sources": ["s-1"]} {"sources": ["s-2"]}',
        '```json\n{"sources": ["s-1"]}\n```\n```json\n{"sources": ["s-2"]}\n```',
        '```python\n{"sources": ["s-1"]}\n```',
        "``````",
    ],
)
def test_prose_two_objects_or_another_fence_are_outside_the_contract(text: str) -> None:
    with pytest.raises(ModelOutputError):
        parse_selection(text)


def test_a_score_too_large_for_a_float_is_outside_the_contract() -> None:
    """An integer score with hundreds of digits is a number JSON allows and no float holds:
    the parser's contract is ModelOutputError, not an OverflowError escaping it."""
    text = json.dumps({"scores": [{"id": "r_a", "score": 10**400}]})
    with pytest.raises(ModelOutputError):
        parse_rerank(text)


@pytest.mark.parametrize("score", [-(10**400), 10**308 * 10])
def test_any_integer_score_is_clamped_or_refused_never_raised_past(score: int) -> None:
    text = json.dumps({"scores": [{"id": "r_a", "score": score}]})
    with contextlib.suppress(ModelOutputError):
        assert parse_rerank(text)["r_a"] in (0.0, 1.0)


def test_a_duplicate_key_is_read_as_json_reads_it_and_validated_all_the_same() -> None:
    """The last of two "queries" keys is the one parsed; either way, it goes through the
    same per-query whitelist (a second key cannot smuggle an unparsed plan)."""
    text = (
        '{"queries": [{"mapping": "m-1", "strategy": "keyword"}],'
        ' "queries": [{"mapping": "m-1", "strategy": "keyword", "sql": "DROP TABLE x"}]}'
    )
    with pytest.raises(ModelOutputError):
        parse_plan(text, source_id="s-1")


# --- the answer stage -----------------------------------------------------------------------

_NAMES = {"s-a": "Alpha Wiki"}


def _scope() -> EffectiveScope:
    scoped = [
        make_scoped(make_source("s-a", answer_permitted=True), mappings=[mapping(source_id="s-a")])
    ]
    capability = make_capability(
        list(_NAMES), response_modes=frozenset({ResponseMode.RESULTS, ResponseMode.ANSWER})
    )
    return make_scope(scoped, capability=capability)


def _ranked() -> list[RankedCandidate]:
    values = {"title": "Annual leave policy", "body": "Employees get 28 days of annual leave."}
    return [ranked(candidate("s-a", "a1", 1.0, values=values), "r_a1", 1.0)]


async def _answer(reply: Callable[[Prompt], str]) -> Any:
    scope, items = _scope(), _ranked()
    model = FakeLanguageModel({PromptTask.ANSWER: reply})
    before = respond(items, scope=scope, warnings=(), correlation_id="c", source_names=_NAMES)
    async with audited_in_scope(make_context(), scope, audit=InMemoryAuditSink()) as invocation:
        return await compose_answer(invocation, "annual leave", before, items, model=model)


@pytest.mark.parametrize(
    "lone", [chr(0xD800), chr(0xDFFF), chr(0xDC80)], ids=["d800", "dfff", "dc80"]
)
async def test_a_lone_surrogate_in_an_answer_never_reaches_the_caller(lone: str) -> None:
    """JSON lets a model write an unpaired surrogate ("\\ud800"); no UTF-8 response can carry
    one, so a caller would get an encoding failure instead of its results. The answer text is
    visible characters only."""
    text = f"Employees get 28 days{lone} of leave [r_a1]."
    after = await _answer(lambda _p: json.dumps({"answer": text, "citations": ["r_a1"]}))
    assert after.answer is not None
    assert after.answer.text == "Employees get 28 days of leave [r_a1]."
    json.dumps(attrs.asdict(after.answer), ensure_ascii=False).encode("utf-8")


# --- marker stripping on hostile records ------------------------------------------------------


class _CountingPattern:
    """Wraps a compiled pattern and counts the passes made over a text with it."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.passes = 0

    def sub(self, repl: str, text: str) -> str:
        self.passes += 1
        return self.pattern.sub(repl, text)

    def finditer(self, text: str) -> Any:
        self.passes += 1
        return self.pattern.finditer(text)


def _nested(depth: int, *, prefix: str = "") -> str:
    """A token nested ``depth`` deep: removing the innermost one makes the next."""
    return prefix + "ESRA-" * depth + "DATA" * depth


@pytest.mark.parametrize("prefix", ["", "\u00e9 ", "\x1e "], ids=["ascii", "folded", "shown-as-e"])
def test_a_deeply_nested_token_is_stripped_in_a_bounded_number_of_passes(
    monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    """A record of 2,000 nested tokens ("ESRA-ESRA-…DATADATA") used to take one pass over the
    whole text per level — quadratic in the record's size, a minute of event-loop time for a
    150 KB record. Stripping now takes a few passes whatever the nesting, and still leaves
    nothing that folds to the token."""
    counting = _CountingPattern(markers._TOKEN)
    monkeypatch.setattr(markers, "_TOKEN", counting)
    text = _nested(2000, prefix=prefix) + " tail"
    stripped = strip_markers(text)
    assert counting.passes <= 4
    assert stripped.endswith(" tail")
    assert not _FOLDED_TOKEN.search(fold(stripped.translate({0x0E: "e", 0x1E: "e"})))


@pytest.mark.parametrize(
    "text",
    [
        "<<" + "END-" * 3000 + "ESRA-DATA id=r_1>>",
        "x" + "-" * 5000 + "ESRA-DATA" * 3000,
        "<<" + " " * 5000 + "ESRA DATA" * 500,
        "E\u0301SRA-" * 1500 + "D\u0301ATA" * 1500,
    ],
    ids=["end-run", "dash-run", "spaced", "marks"],
)
def test_other_long_token_runs_are_stripped_in_a_bounded_number_of_passes(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    counting = _CountingPattern(markers._TOKEN)
    monkeypatch.setattr(markers, "_TOKEN", counting)
    stripped = strip_markers(text)
    assert counting.passes <= 4
    assert not _FOLDED_TOKEN.search(fold(stripped))


_TOKENISH = st.lists(
    st.sampled_from(
        [*"EeSsRrAaDdTtNn-_ <x", "\u2011", "\u0415", "\u200b", "\x1e", "\u017f", "ESRA", "DATA"]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=400)
@given(parts=st.lists(_TOKENISH, max_size=6))
def test_stripping_token_soup_leaves_no_folded_token(parts: Sequence[str]) -> None:
    text = "".join(parts)
    stripped = strip_markers(text)
    assert not markers._TOKEN.search(fold(stripped.translate({0x0E: "e", 0x1E: "e"})))
    assert strip_markers(stripped) == stripped
