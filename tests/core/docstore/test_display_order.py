"""The display order of a line (UAX #9, reduced), which the scanner reads bidi text in.

Each expected order below was checked against a full implementation of the algorithm (the
``python-bidi`` package, not a dependency); what is left out here (N0, paired brackets) does
not appear in them.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esra.core._docstore.display_order import display_order

RLO, PDF, RLE = "\u202e", "\u202c", "\u202b"  # override, its end, embedding
RLI, LRI, PDI = "\u2067", "\u2066", "\u2069"  # isolates and their end
RLM = "\u200f"  # right-to-left mark


def _shown(line: str) -> str:
    return "".join(line[index] for index in display_order(line))


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("plain text stays", "plain text stays"),
        (f"{RLO}snoitcurtsni{PDF} ok", "instructions ok"),
        # Hebrew in a left-to-right line; numbers after it keep their own order.
        ("abc 123 \u05d0\u05d1\u05d2 456 def", "abc 123 456 \u05d2\u05d1\u05d0 def"),
        # A right-to-left line (first strong letter Hebrew) with English and a number inside.
        (
            "\u05d0\u05d1\u05d2 abc def 12.5% \u05d3\u05d4!",
            "!\u05d4\u05d3 abc def 12.5% \u05d2\u05d1\u05d0",
        ),
        ("\u0627\u0644 1,000.5 \u0628", "\u0628 1,000.5 \u0644\u0627"),
        # Isolates keep their content apart from the text around.
        (f"car {RLI}\u05d0\u05d1 1{PDI} end", f"car {RLI}1 \u05d1\u05d0{PDI} end"),
        (f"\u05d0 {LRI}abc def{PDI} \u05d1", f"\u05d1 {PDI}abc def{LRI} \u05d0"),
        (f"x {RLE}\u05d0 y{PDF} z", "x y \u05d0 z"),
        # Start and end of a sequence compare embedding levels, not resolved ones.
        (f".\u0661\u0662{PDF}{RLM}{RLE}11{PDF}!z", f"z!11{RLM}\u0661\u0662."),
    ],
    ids=repr,
)
def test_a_line_displays_as_the_algorithm_lays_it_out(line: str, shown: str) -> None:
    """Embedding and override controls display as nothing; isolates and marks stay."""
    assert _shown(line) == shown


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            [*"ab 1.,!%\t", "\u05d0", "\u0627", "\u0661", "\u0301", "\u200b", "\u200e", RLM]
            + [chr(c) for c in range(0x202A, 0x202F)]
            + [chr(c) for c in range(0x2066, 0x206A)]
        ),
        max_size=40,
    )
)
def test_every_displayed_character_is_there_once(line: str) -> None:
    """A permutation of the line less what displays as nothing (X9)."""
    order = display_order(line)
    assert len(order) == len(set(order))
    removed = {i for i, c in enumerate(line) if c in "\u202a\u202b\u202c\u202d\u202e\u200b"}
    assert set(order) == set(range(len(line))) - removed
