"""Reference items made from configuration are made once per configuration object."""

from __future__ import annotations

import attrs
import pytest

from esra.core._prompts.builders import build_planning_prompt, build_selection_prompt
from esra.core._prompts.config_items import ConfigItems
from esra.core._prompts.markers import strip_untrusted
from esra.core._prompts.model import Prompt, ReferenceItem
from esra.core.config import Mapping, Operator, Source
from esra.core.ports import ProviderCapabilities, TextIndexKind
from esra.core.providers import Strategy
from tests.core.factories import make_mapping, make_source

CAPABILITIES = ProviderCapabilities(
    strategies=frozenset({Strategy.KEYWORD}),
    operators=frozenset({Operator.EQ}),
    text_index=TextIndexKind.IN_MEMORY,
)


class _Counting:
    def __init__(self) -> None:
        self.made = 0

    def __call__(self) -> ReferenceItem:
        self.made += 1
        return ReferenceItem.of_value(*strip_untrusted("t", {"n": self.made}))


def test_an_item_is_made_once_per_object_and_settings() -> None:
    """The same objects and settings get the item made the first time; other settings or
    another (even equal) object get one made for them."""
    items, make = ConfigItems(), _Counting()
    source = make_source()
    first = items.item((source,), ("a",), make)
    assert items.item((source,), ("a",), make) is first
    assert items.item((source,), ("b",), make) is not first
    assert items.item((attrs.evolve(source),), ("a",), make) is not first
    assert make.made == 3


def test_the_oldest_item_is_forgotten_past_the_limit() -> None:
    """Bounded: past ``limit`` items the oldest is made again when next asked for."""
    items, make = ConfigItems(limit=2), _Counting()
    one, two, three = make_source("one"), make_source("two"), make_source("three")
    first = items.item((one,), (), make)
    items.item((two,), (), make)
    items.item((three,), (), make)
    assert len(items) == 2
    assert items.item((one,), (), make) is not first
    with pytest.raises(ValueError, match="at least 1"):
        ConfigItems(limit=0)


def _planning(
    source: Source, mapping: Mapping, capabilities: ProviderCapabilities, queries: int = 3
) -> Prompt:
    return build_planning_prompt(
        "q", source, [mapping], capabilities, max_queries=queries, model_profile="p"
    )


def test_prompts_carry_the_same_items_as_when_each_was_made_anew() -> None:
    """A second prompt over the same configuration shares the first one's items, and they
    are what a fresh build makes: same tag, JSON text and value."""
    source, mapping = make_source(), make_mapping()
    first = build_planning_prompt(
        "q", source, [mapping], CAPABILITIES, max_queries=3, model_profile="p"
    )
    again = build_planning_prompt(
        "r", source, [mapping], CAPABILITIES, max_queries=3, model_profile="p"
    )
    assert all(a is b for a, b in zip(first.reference, again.reference, strict=True))
    fresh = _planning(attrs.evolve(source), attrs.evolve(mapping), attrs.evolve(CAPABILITIES))
    assert fresh.reference == first.reference
    assert [i.value for i in fresh.reference] == [i.value for i in first.reference]
    other = build_planning_prompt(
        "q", source, [mapping], CAPABILITIES, max_queries=2, model_profile="p"
    )
    assert other.reference[0] != first.reference[0]
    selection = build_selection_prompt("q", [source], model_profile="p")
    assert (
        build_selection_prompt("r", [source], model_profile="p").reference[0]
        is selection.reference[0]
    )
