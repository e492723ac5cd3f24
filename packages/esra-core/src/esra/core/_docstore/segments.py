"""Segmentation: a document's extracted text cut into contiguous, bounded, non-overlapping spans.

Segments, not documents, are indexed: a long document stored as one row drowns term
frequency in length and makes every snippet re-read the whole text. A segment is a slice
``text[start:end]`` of the extracted text — the slices partition it, so concatenating them in
ordinal order reconstructs the document exactly (what fetch serves). What is *indexed* may
carry a prefix that is not part of the slice: each CSV segment repeats the header line so it
is self-describing.

Natural boundaries come from extraction (page starts for PDF, heading starts for DOCX and
Markdown, paragraph breaks for text, row starts for CSV); spans longer than ``max_chars`` are
split again at the last paragraph break, line break or space before the limit.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from esra.core._docstore.refusals import DocumentRefusedError
from esra.core.codes import DocumentRefusal

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_SEGMENTS",
    "Segment",
    "reconstruct",
    "segment_text",
    "too_many_segments",
]

DEFAULT_MAX_CHARS = 4000
# A 25 MB text (the default upload limit) in 1,200-character paragraph groups is about 21,000
# segments, and 3,000-character CSV blocks about 8,700: 50,000 leaves room for any real
# document while a file of a million one-line headings is refused before it is materialised.
DEFAULT_MAX_SEGMENTS = 50_000


def too_many_segments(limit: int) -> DocumentRefusedError:
    """The refusal for a document that would split into more than ``limit`` segments."""
    return DocumentRefusedError(
        DocumentRefusal.TOO_MANY_SEGMENTS, detail=f"more than {limit} segments"
    )


@attrs.frozen
class Segment:
    """One indexed unit of a document.

    ``start``/``end`` locate the slice in the extracted text; ``prefix`` is indexed before it
    but is not part of the document (the repeated CSV header).
    """

    ordinal: int
    start: int
    end: int
    label: str
    prefix: str = ""

    def body(self, text: str) -> str:
        """The slice of ``text`` this segment covers."""
        return text[self.start : self.end]

    def indexed_text(self, text: str) -> str:
        """What the full-text index sees: the prefix, then the slice."""
        return self.prefix + self.body(text)


def _split_point(text: str, start: int, limit: int) -> int:
    """The best cut in ``text[start:limit]``: after a blank line, a newline, or a space."""
    window = text[start:limit]
    for separator in ("\n\n", "\n", " "):
        cut = window.rfind(separator)
        if cut > 0:
            return start + cut + len(separator)
    return limit


def _group(units: list[tuple[int, int, int]], min_chars: int) -> list[tuple[int, int, int]]:
    """Merge units shorter than ``min_chars`` into the following one (the last always closes)."""
    grouped: list[tuple[int, int, int]] = []
    opened: tuple[int, int] | None = None  # (start, index) of the group being built
    for position, (start, end, index) in enumerate(units):
        group_start, group_index = opened or (start, index)
        if end - group_start < min_chars and position < len(units) - 1:
            opened = (group_start, group_index)
            continue
        grouped.append((group_start, end, group_index))
        opened = None
    return grouped


def _bounded(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    spans = []
    while end - start > max_chars:
        cut = _split_point(text, start, start + max_chars)
        spans.append((start, cut))
        start = cut
    if end > start:
        spans.append((start, end))
    return spans


def segment_text(
    text: str,
    boundaries: Sequence[int] = (),
    *,
    labels: Sequence[str] = (),
    max_chars: int = DEFAULT_MAX_CHARS,
    min_chars: int = 0,
    prefix: str = "",
    prefix_from: int = 1,
    max_segments: int = DEFAULT_MAX_SEGMENTS,
) -> list[Segment]:
    """Cut ``text`` at ``boundaries`` (offsets where a natural unit begins), then bound each.

    Args:
        text: the extracted text.
        boundaries: unit start offsets; ``0`` is implied. Out-of-range ones are ignored.
        labels: a label per unit (for example "page 3" or a heading), by unit index.
        max_chars: the longest slice a segment may have.
        min_chars: units shorter than this merge into the following unit (paragraph
            grouping); ``0`` keeps every unit.
        prefix: indexed before every segment from ``prefix_from`` on (CSV header).
        prefix_from: the first ordinal that gets ``prefix``.
        max_segments: the most segments a document may have.

    Returns:
        Segments in order, partitioning ``text`` (empty text gives none). Whitespace-only
        slices are kept, so reconstruction stays exact.

    Raises:
        DocumentRefusedError: ``TOO_MANY_SEGMENTS`` as soon as the count passes
            ``max_segments`` — never after building them all.
    """
    if not text:
        return []
    starts = sorted({0, *(b for b in boundaries if 0 < b < len(text))})
    if len(starts) > max_segments and min_chars <= 0:
        raise too_many_segments(max_segments)  # one segment per unit at least
    units = [
        (s, e, i) for i, (s, e) in enumerate(zip(starts, [*starts[1:], len(text)], strict=True))
    ]
    if min_chars > 0:
        units = _group(units, min_chars)
    segments: list[Segment] = []
    for start, end, index in units:
        label = labels[index] if index < len(labels) else ""
        for piece_start, piece_end in _bounded(text, start, end, max_chars):
            ordinal = len(segments)
            if ordinal >= max_segments:
                raise too_many_segments(max_segments)
            segments.append(
                Segment(
                    ordinal=ordinal,
                    start=piece_start,
                    end=piece_end,
                    label=label,
                    prefix=prefix if prefix and ordinal >= prefix_from else "",
                )
            )
    return segments


def reconstruct(text: str, segments: Sequence[Segment]) -> str:
    """Concatenate the segments' slices in ordinal order (equals ``text`` for a partition)."""
    return "".join(s.body(text) for s in sorted(segments, key=lambda s: s.ordinal))
