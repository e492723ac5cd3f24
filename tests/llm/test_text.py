"""Tests for the LocalModel's shared word handling (tokens, stemmer, stopwords, sanitizing)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.llm._text import (
    MAX_TERM_CHARS,
    content_words,
    marked_terms,
    quoted_phrases,
    root,
    sanitize,
    stem,
    tokens,
    uppercase_tokens,
)
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


def test_quoted_phrases_are_normalized() -> None:
    """Double-quoted text (straight or curly) is a phrase, lower-cased, spaces collapsed."""
    assert quoted_phrases('find "Expense  Report" and “travel policy”') == [
        "expense report",
        "travel policy",
    ]


def test_marked_terms_are_only_the_explicit_ones() -> None:
    """'+word' and 'must include word' mark a word; capitals, digits and 'must' alone do not."""
    assert marked_terms("+titanium frames that must include carbon") == ["titanium", "carbon"]
    assert marked_terms("what must employees do about INV-2041 in NASA") == []
    assert marked_terms("a+b and 3+4") == []


def test_capitals_mark_words_only_beside_lower_case() -> None:
    """'IT laptop setup' singles out IT; a question written all in capitals singles out none."""
    assert uppercase_tokens("IT laptop setup for the US office") == ["it", "us"]
    assert uppercase_tokens("KENNEDY ADMINISTRATION PRESSURE ON NGO DINH DIEM") == []


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


# Texts for the shortcut: ASCII, ASCII with the ellipsis a fragment carries, and long words.
_ASCII_WITH_ELLIPSES = st.text(
    alphabet=st.characters(max_codepoint=127) | st.just("\u2026"), max_size=80
)
_LONG_WORDS = st.text(alphabet="aZ9 \u2026\u00e9", min_size=50, max_size=200)


@given(
    st.text(alphabet=st.characters(max_codepoint=127), max_size=80)
    | _ASCII_WITH_ELLIPSES
    | _LONG_WORDS
    | st.text(max_size=80)
)
def test_tokens_are_each_word_casefolded_whatever_the_alphabet(text: str) -> None:
    """The ASCII shortcut (ellipses allowed) gives exactly the words the general path gives,
    each cut to MAX_TERM_CHARS."""
    expected = [w.casefold()[:MAX_TERM_CHARS] for w in re.findall(r"[^\W_]+", text)]
    assert tokens(text) == expected


@given(st.text(max_size=80) | _LONG_WORDS)
def test_no_word_stems_or_roots_to_nothing(text: str) -> None:
    """The rerank marks stopwords with an empty root, so no word's root may be empty."""
    for word in tokens(text):
        assert stem(word)
        assert root(stem(word))
