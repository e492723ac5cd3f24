"""NAME=VALUE claims, as `esra dev-token --claim`, `esra explain --as` and the portal read them."""

from __future__ import annotations

import pytest

from esra.starlette._claim_pairs import MalformedClaimError, parse_claim_pairs


def test_a_name_given_twice_is_a_list_and_values_keep_their_blanks() -> None:
    claims = parse_claim_pairs(["region=emea", " groups =hr", "groups=a=b", "note= x "])
    assert claims == {"region": "emea", "groups": ("hr", "a=b"), "note": " x "}


def test_a_forms_values_are_stripped() -> None:
    assert parse_claim_pairs(["region = emea "], strip_values=True) == {"region": "emea"}


@pytest.mark.parametrize("pair", ["no-equals", "=value", "  =value"])
def test_a_pair_that_is_not_name_equals_value_is_refused(pair: str) -> None:
    with pytest.raises(MalformedClaimError) as refused:
        parse_claim_pairs(["ok=1", pair])
    assert refused.value.pair == pair
