"""A caller is its subject *and* the issuer that vouched for it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from esra.core._context import CallerIdentity

names = st.text(max_size=40)


@given(first=st.tuples(names, names), second=st.tuples(names, names))
def test_two_callers_share_a_key_only_when_issuer_and_subject_both_match(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    # No spelling of an issuer and a subject can produce another pair's key: "a" + "b:c" and
    # "a:b" + "c" are two callers, as are the same subject from two issuers.
    key_of = {pair: CallerIdentity(subject=pair[1], issuer=pair[0]).key for pair in (first, second)}
    assert (key_of[first] == key_of[second]) == (first == second)


def test_the_key_ignores_claims() -> None:
    # Claims change from token to token; what is kept per caller must not follow them.
    assert (
        CallerIdentity("alice", {"region": "emea"}, issuer="https://idp.example/").key
        == CallerIdentity("alice", {"region": "apac"}, issuer="https://idp.example/").key
    )
