"""Tests for the LocalModel's shared word handling (tokens, stemmer, stopwords, sanitizing)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.llm._text import content_words, noun_run, quoted_phrases, root, sanitize, stem
from esra.llm._vocabulary import acronym_of, synonyms_of


@pytest.mark.parametrize(
    ("forms", "expected_equal"),
    [
        (("policy", "policies"), True),
        (("laptop", "laptops"), True),
        (("leave", "leaves", "leaving"), True),
        (("update", "updated", "updating", "updates"), True),
        (("plan", "planned", "planning"), True),
        (("bill", "billed"), True),
        (("status", "analysis"), False),
    ],
)
def test_stem_makes_word_forms_meet(forms: tuple[str, ...], expected_equal: bool) -> None:
    """Plural, -ing and -ed forms of one word share a stem; unrelated words do not."""
    assert (len({stem(w) for w in forms}) == 1) is expected_equal


def test_stem_keeps_words_ending_in_s_that_are_not_plurals() -> None:
    """'status' and 'analysis' keep their final s."""
    assert stem("status") == "status"
    assert stem("analysis") == "analysis"


def test_content_words_drop_stopwords_and_duplicate_forms() -> None:
    """Content words keep order, drop stopwords, and keep one surface form per stem."""
    assert content_words("Show me the laptops and the laptop policy, please") == [
        "laptops",
        "policy",
    ]


def test_quoted_phrases_and_noun_runs() -> None:
    """Double-quoted text is a phrase; otherwise the longest run of content words is."""
    assert quoted_phrases('find "Expense  Report" and “travel policy”') == [
        "expense report",
        "travel policy",
    ]
    assert noun_run("where is the expense report template for travel?") == (
        "expense report template"
    )
    assert noun_run("where is it") is None


def test_noun_runs_stop_at_punctuation() -> None:
    """A comma ends a phrase: words on both sides are not one noun phrase."""
    assert noun_run("laptops, monitors") is None


def test_vocabulary_knows_synonyms_by_stem_and_expansions() -> None:
    """Synonyms are found for any form of a word; spelled-out acronyms are found in place."""
    assert "reimbursement" in synonyms_of("refunds")
    assert "notebook" in synonyms_of("laptop")
    assert acronym_of(["my", "paid", "time", "off", "balance"]) == [("pto", 1, 4)]


@given(st.text())
def test_sanitize_never_leaves_unsafe_sequences(text: str) -> None:
    """Whatever goes in, no statement separator, comment sequence or control char comes out."""
    out = sanitize(text)
    for sequence in (";", "--", "/*", "*/", "#"):
        assert sequence not in out
    assert all(c.isprintable() or c == " " for c in out)


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("hopping", "hop"),
        ("relational", "relat"),
        ("similarity", "similar"),
        ("conditional", "condit"),
        ("conditions", "condit"),
        ("generalizations", "gener"),
        ("controll", "control"),
        ("as", "as"),
    ],
)
def test_root_is_the_porter_stem(word: str, expected: str) -> None:
    """``root`` follows the original Porter algorithm (short words are kept)."""
    assert root(word) == expected
