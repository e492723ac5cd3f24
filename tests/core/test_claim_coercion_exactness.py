"""A claim binds as exactly the value the identity provider sent, or not at all.

Found by a hostile review of record-level security: ``float()`` rounded a too-precise number
claim (``2.9999999999999999`` became ``3.0`` and matched ``<= 3`` rows), and a text claim of
one space matched rows whose field was empty on MariaDB (PAD SPACE), as ``'emea '`` matched
``'emea'``. Both are refused now (the source is dropped: fail closed) on every engine.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from esra.core._config.mapping import FieldType
from esra.core._record_predicate import MissingClaimError, coerce_claim


@pytest.mark.parametrize(
    "claim", ["2.9999999999999999", "9007199254740993.0", "1.00000000000000001"]
)
def test_a_number_claim_is_bound_exactly_or_refused(claim: str) -> None:
    """Coercion to the field's type never turns the claim into another number: a rounded
    value compares equal to (or above) rows the claim does not name."""
    try:
        value = coerce_claim(claim, FieldType.NUMBER)
    except MissingClaimError:
        return
    assert Decimal(str(value)) == Decimal(claim), (claim, value)


@pytest.mark.parametrize("claim", ["0.1", "2.5", "-7.25", "1.50", "12"])
def test_an_ordinary_number_claim_still_binds(claim: str) -> None:
    assert Decimal(str(coerce_claim(claim, FieldType.NUMBER))) == Decimal(claim)


@pytest.mark.parametrize("claim", [" ", "emea ", " emea", "emea\u00a0", "\u3000"])
def test_a_text_claim_padded_with_whitespace_is_refused(claim: str) -> None:
    with pytest.raises(MissingClaimError):
        coerce_claim(claim, FieldType.TEXT)


def test_inner_whitespace_is_part_of_a_text_claim() -> None:
    assert coerce_claim("North America", FieldType.TEXT) == "North America"
