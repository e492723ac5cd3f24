"""Tests for optional_words: the words of a plan's optional terms, each once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from esra.core._pipeline.optional_words import optional_words


def test_splits_on_whitespace_and_keeps_the_first_spelling() -> None:
    """Words in order; a word met again in another case is dropped, its first form kept."""
    assert optional_words(["Heat transfer", "heat", "TRANSFER\tcoefficient"]) == (
        "Heat",
        "transfer",
        "coefficient",
    )


def test_keeps_what_lies_between_spaces_whole() -> None:
    """Only whitespace separates: the engine tokenizes the rest as it always did."""
    assert optional_words(["e-bike c++ AT&T", "naïve\u00a0café"]) == (
        "e-bike",
        "c++",
        "AT&T",
        "naïve",
        "café",
    )


@given(st.lists(st.text()))
def test_words_are_unique_single_words_and_idempotent(terms: list[str]) -> None:
    """Every word is non-empty, holds no whitespace, occurs once (case folded), and the words
    of the words are the same words."""
    words = optional_words(terms)
    assert all(word and word.split() == [word] for word in words)
    assert len({word.casefold() for word in words}) == len(words)
    assert optional_words(words) == words
    assert {w.casefold() for w in words} == {w.casefold() for t in terms for w in t.split()}
