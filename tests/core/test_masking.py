"""Masking of returned values and their rendering as response text."""

from __future__ import annotations

import string
from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._masking import MASK, mask, masked_values, render_value
from esra.core._query import RowValue
from esra.core.config import MaskingKind, MaskingRule
from tests.core._ranking_fixtures import mapping


def test_full_mask_hides_everything_at_a_fixed_width() -> None:
    """FULL returns the same mask whatever the value, so not even the length leaks."""
    assert mask("123-45-6789", MaskingKind.FULL) == MASK
    assert mask("x", MaskingKind.FULL) == MASK
    assert mask("", MaskingKind.FULL) == MASK


def test_last4_keeps_only_the_last_four_characters() -> None:
    """LAST4 shows the last four characters behind a fixed-width mask."""
    assert mask("4111111111111111", MaskingKind.LAST4) == MASK + "1111"
    assert mask("AB-98765", MaskingKind.LAST4) == MASK + "8765"


@pytest.mark.parametrize("value", ["", "7", "1234"])
def test_last4_masks_fully_when_four_characters_would_be_the_whole_value(value: str) -> None:
    """A value of four characters or fewer is not revealed by 'last four'."""
    assert mask(value, MaskingKind.LAST4) == MASK


def test_email_mask_keeps_first_letter_and_domain() -> None:
    """EMAIL keeps the local part's first character and the domain."""
    assert mask("jane.doe@example.com", MaskingKind.EMAIL) == f"j{MASK}@example.com"
    assert mask('"odd@local"@example.org', MaskingKind.EMAIL) == f'"{MASK}@example.org'


@pytest.mark.parametrize("value", ["no-at-sign", "@example.com", "jane@", ""])
def test_email_mask_hides_anything_that_is_not_an_address(value: str) -> None:
    """A value that is not local@domain is masked completely rather than guessed at."""
    assert mask(value, MaskingKind.EMAIL) == MASK


# Text that is no address though it has a local part, an "@" and something after it: the
# EMAIL rule must not return what follows the "@" (before the fix every one of these kept it).
SECRET = "SSN 078-05-1120 salary 250000"
NOT_ADDRESSES = {
    "address-then-notes": f"jane@corp.example {SECRET}",
    "at-then-free-text": f"jane@ {SECRET}",
    "sentence-around-an-address": f"contact: jane@corp.example; {SECRET}",
    "tab-inside": "jane@corp.example\tsalary=250000",
    "newline-inside": "jane@corp.example\n250000",
    "no-dot-in-domain": "jane@localhost",
    "domain-of-punctuation": "jane@salary:250000,ssn:078-05-1120",
    "domain-with-underscore": "jane@corp_example.com",
    "empty-label": "jane@corp..example",
    "leading-dot": "jane@.corp.example",
    "trailing-dot": "jane@corp.example.",
    "hyphen-at-label-start": "jane@-corp.example",
    "hyphen-at-label-end": "jane@corp-.example",
    "label-over-63-characters": "jane@" + "a" * 64 + ".example",
    "zero-width-in-domain": "jane@corp\u200b.example",
    "nul-in-domain": "jane@corp\x00.example",
    "non-breaking-space-before-domain": "jane\u00a0x@corp.example",
    "fullwidth-dot": "jane@corp\uff0eexample",
    "unicode-domain": "jane@b\u00fccher.example",
}


@pytest.mark.parametrize("value", list(NOT_ADDRESSES.values()), ids=list(NOT_ADDRESSES))
def test_email_mask_hides_text_after_the_at_sign_unless_the_value_is_one_address(
    value: str,
) -> None:
    """Only a value that is a single address keeps its domain; anything else is masked whole."""
    assert mask(value, MaskingKind.EMAIL) == MASK


@pytest.mark.parametrize(
    ("value", "masked"),
    [
        ("jane@corp.example", f"j{MASK}@corp.example"),
        ("j.doe+hr@mail.corp-1.example.co.uk", f"j{MASK}@mail.corp-1.example.co.uk"),
        ("ANN@CORP.EXAMPLE", f"A{MASK}@CORP.EXAMPLE"),
        # An internationalised domain in its ASCII (A-label) form, as DNS carries it.
        ("jane@xn--bcher-kva.example", f"j{MASK}@xn--bcher-kva.example"),
    ],
)
def test_email_mask_keeps_the_domain_of_a_single_address(value: str, masked: str) -> None:
    assert mask(value, MaskingKind.EMAIL) == masked


def _is_dns_domain(text: str) -> bool:
    """The test's own statement of a domain: dot-separated LDH labels, at least two."""
    labels = text.split(".")
    ldh = set(string.ascii_letters + string.digits + "-")
    return len(labels) >= 2 and all(
        0 < len(label) <= 63
        and set(label) <= ldh
        and not label.startswith("-")
        and not label.endswith("-")
        for label in labels
    )


# Characters that make the boundary cases likely: domain characters, separators, whitespace,
# invisible and non-ASCII ones.
_EMAIL_ALPHABET = st.sampled_from(
    [
        *(string.ascii_letters[:6] + string.digits[:3] + ".-@_:;, \t\n"),
        *("\u00a0", "\u200b", "\u2028", "\x00", "\u00fc", "\uff0e", "\u0661"),
    ]
)


@settings(deadline=None, max_examples=500)
@given(st.one_of(st.text(), st.text(alphabet=_EMAIL_ALPHABET)))
def test_email_mask_reveals_one_character_and_a_domain_or_nothing(value: str) -> None:
    """Whatever the text, EMAIL returns the full mask, or the first character, the mask and a
    DNS-shaped domain when the value is exactly ``local@domain`` without whitespace."""
    masked = mask(value, MaskingKind.EMAIL)
    if masked == MASK:
        return
    local, _, domain = value.rpartition("@")
    assert masked == f"{value[0]}{MASK}@{domain}"
    assert local
    assert _is_dns_domain(domain)
    assert not any(ch.isspace() for ch in value)
    assert value.isprintable()


@settings(deadline=None, max_examples=300)
@given(
    local=st.text(alphabet=_EMAIL_ALPHABET, min_size=1),
    after=st.text(alphabet=_EMAIL_ALPHABET, min_size=1).filter(lambda s: not _is_dns_domain(s)),
)
def test_no_character_after_the_at_sign_of_a_non_address_survives(local: str, after: str) -> None:
    """``local@after`` whose part after the last "@" is no domain is masked whole."""
    value = f"{local}@{after}"
    if _is_dns_domain(value.rpartition("@")[2]):
        return  # ``after`` held an "@" of its own followed by a domain: an address
    assert mask(value, MaskingKind.EMAIL) == MASK


@settings(deadline=None, max_examples=300)
@given(
    address=st.emails(),
    separator=st.sampled_from([" ", "\t", "\n", "\u00a0", "\u2028"]),
    tail=st.text(max_size=20),
)
def test_an_address_with_anything_after_whitespace_is_masked_whole(
    address: str, separator: str, tail: str
) -> None:
    """An address followed by notes keeps neither the notes nor the domain."""
    assert mask(f"{address}{separator}{tail}", MaskingKind.EMAIL) == MASK


@settings(deadline=None)
@given(st.text(min_size=9, alphabet=st.characters(blacklist_characters="*")))
def test_masks_never_reveal_more_than_their_rule(value: str) -> None:
    """FULL reveals nothing of the value; LAST4 reveals exactly its last four characters."""
    assert value not in mask(value, MaskingKind.FULL)
    assert mask(value, MaskingKind.LAST4) == MASK + value[-4:]
    assert value not in mask(value, MaskingKind.LAST4)


def test_render_value_formats_each_row_type() -> None:
    """Dates are ISO 8601, booleans lowercase, numbers plain, None stays absent."""
    assert render_value(date(2025, 3, 4)) == "2025-03-04"
    assert render_value(datetime(2025, 3, 4, 5, 6, tzinfo=UTC)) == "2025-03-04T05:06:00+00:00"
    assert render_value(True) == "true"
    assert render_value(False) == "false"
    assert render_value(12) == "12"
    assert render_value(2.5) == "2.5"
    assert render_value("text") == "text"
    assert render_value(None) is None


def test_masked_values_masks_ruled_fields_and_renders_the_rest() -> None:
    """Each masking rule applies to its own field only; missing values are left out."""
    m = mapping(
        masking=(
            MaskingRule("owner_email", MaskingKind.EMAIL),
            MaskingRule("account", MaskingKind.LAST4),
            MaskingRule("pages", MaskingKind.FULL),
        )
    )
    values: dict[str, RowValue] = {
        "title": "Quarterly report",
        "owner_email": "ann@corp.example",
        "account": "DE89370400440532013000",
        "pages": 12,
        "updated": date(2025, 1, 2),
        "approved": None,
    }
    assert masked_values(values, m) == {
        "title": "Quarterly report",
        "owner_email": f"a{MASK}@corp.example",
        "account": MASK + "3000",
        "pages": MASK,
        "updated": "2025-01-02",
    }
