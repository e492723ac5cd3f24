"""Masking of returned values and their rendering as response text."""

from __future__ import annotations

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
