"""Segmentation partitions the extracted text: exact reconstruction, bounded, no overlap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from esra.core._docstore.segments import reconstruct, segment_text


@given(
    text=st.text(min_size=0, max_size=3000),
    cuts=st.lists(st.integers(min_value=-5, max_value=3100), max_size=20),
    max_chars=st.integers(min_value=1, max_value=500),
    min_chars=st.integers(min_value=0, max_value=300),
)
def test_segments_partition_the_text(
    text: str, cuts: list[int], max_chars: int, min_chars: int
) -> None:
    """Slices are contiguous, non-overlapping, bounded, and concatenate back to the text."""
    segments = segment_text(text, cuts, max_chars=max_chars, min_chars=min_chars)
    assert reconstruct(text, segments) == text
    position = 0
    for ordinal, segment in enumerate(segments):
        assert segment.ordinal == ordinal
        assert segment.start == position
        assert 0 < segment.end - segment.start <= max_chars
        position = segment.end
    assert position == len(text)


def test_natural_boundaries_and_labels_are_kept() -> None:
    """Units start where extraction said, with their labels."""
    text = "# A\nalpha\n# B\nbeta\n"
    segments = segment_text(text, [text.index("# B")], labels=["A", "B"])
    assert [s.body(text) for s in segments] == ["# A\nalpha\n", "# B\nbeta\n"]
    assert [s.label for s in segments] == ["A", "B"]


def test_an_oversized_unit_splits_at_a_paragraph_break_first() -> None:
    """A long unit is cut at the last blank line before the limit, not mid-word."""
    text = "first paragraph here\n\nsecond paragraph that is long"
    segments = segment_text(text, max_chars=30)
    assert segments[0].body(text) == "first paragraph here\n\n"


def test_small_units_merge_into_paragraph_groups() -> None:
    """With min_chars, short paragraphs group with the next instead of standing alone."""
    text = "a\n\nb\n\nc\n\n" + "d" * 50
    starts = [3, 6, 9]
    segments = segment_text(text, starts, min_chars=20)
    assert len(segments) == 1
    assert reconstruct(text, segments) == text


def test_the_prefix_is_indexed_but_not_reconstructed() -> None:
    """CSV segments repeat the header for the index; fetch still rebuilds the exact text."""
    text = "h1,h2\n1,2\n3,4\n"
    segments = segment_text(text, [text.index("3,4")], prefix="h1,h2\n")
    assert segments[0].indexed_text(text) == "h1,h2\n1,2\n"
    assert segments[1].indexed_text(text) == "h1,h2\n3,4\n"
    assert reconstruct(text, segments) == text
