"""Extraction and segmentation are bounded in memory and linear in time, whatever the file.

The attacks: a 21.5 MB Markdown file of headings (107 s, 1.7 GB in ``esra ingest``), a CSV
or text file of millions of empty rows or blank lines, one heading line with a long run of
blanks (the heading pattern backtracked quadratically), and a CSV of blank lines against the
upload's DDE check (quadratic too). Each now fails classified or yields a bounded number of
segments; memory is asserted with tracemalloc, never time.
"""

from __future__ import annotations

import contextlib
import io
import tracemalloc
from collections.abc import Callable

import pytest

from esra.core._docstore._text_pdf import text_pdf
from esra.core._docstore.extraction import (
    CSV_HEADER_PREFIX_CHARS,
    LABEL_CHARS,
    Extraction,
    ExtractionLimits,
    extract,
    segment_extraction,
)
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.segments import DEFAULT_MAX_SEGMENTS, reconstruct, segment_text
from esra.core._docstore.upload import AcceptedUpload, inspect_upload
from esra.core.codes import DocumentRefusal

MB = 1024 * 1024


def _upload(name: str, data: bytes) -> AcceptedUpload:
    return inspect_upload(name, data)


def _peak(work: Callable[[], object]) -> int:
    """Peak bytes traced while ``work`` runs (its inputs are allocated before)."""
    tracemalloc.start()
    with contextlib.suppress(DocumentRefusedError):
        work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _refusal(work: Callable[[], object]) -> DocumentRefusal:
    with pytest.raises(DocumentRefusedError) as raised:
        work()
    return raised.value.refusal


def test_a_21mb_markdown_file_of_headings_is_refused_with_bounded_memory() -> None:
    """The reviewer's file, at full size and default limits: TOO_MANY_SEGMENTS, and the peak
    is the decoded text plus the ceiling's worth of starts — not a million segments."""
    data = b"".join(b"# Heading %d\n" % i for i in range(1_800_000))[:21_500_000]
    upload = _upload("headings.md", data)
    assert _refusal(lambda: extract(upload)) is DocumentRefusal.TOO_MANY_SEGMENTS
    assert _peak(lambda: extract(upload)) < 2 * len(data)


def test_the_segment_ceiling_is_configurable_and_exact() -> None:
    """``max_segments`` units are allowed; one more is refused."""
    data = b"".join(b"# H%d\nbody\n" % i for i in range(100))
    upload = _upload("a.md", data)
    extraction = extract(upload, limits=ExtractionLimits(max_segments=100))
    assert len(segment_extraction(extraction)) == 100
    limits = ExtractionLimits(max_segments=99)
    assert _refusal(lambda: extract(upload, limits=limits)) is DocumentRefusal.TOO_MANY_SEGMENTS


def test_segmenting_refuses_as_soon_as_splitting_passes_the_ceiling() -> None:
    """One huge unit split by ``max_chars`` counts too: refused while cutting, not after."""
    text = "word " * 100_000
    with pytest.raises(DocumentRefusedError) as raised:
        segment_text(text, max_chars=100, max_segments=1000)
    assert raised.value.refusal is DocumentRefusal.TOO_MANY_SEGMENTS
    extraction = Extraction(text=text, max_segments=100)  # 125 pieces of 4,000 characters
    assert _refusal(lambda: segment_extraction(extraction)) is DocumentRefusal.TOO_MANY_SEGMENTS


def test_a_text_file_of_blank_lines_groups_without_listing_every_break() -> None:
    """Two million paragraph breaks: grouped as they stream past, so the peak stays near the
    text itself. The old code listed every break and built a unit for each: tens of bytes per
    two-byte break at any size, so two million show it as surely as twelve did (traced by
    tracemalloc, those twelve million took 20 s of the suite)."""
    data = b"\n\n" * 1_000_000
    upload = _upload("blank.txt", data)
    extraction = extract(upload)
    assert len(extraction.boundaries) < len(data) // 1000
    assert _peak(lambda: extract(upload)) < 2 * len(data)
    segments = segment_extraction(extraction)
    assert len(segments) <= DEFAULT_MAX_SEGMENTS
    assert reconstruct(extraction.text, segments) == extraction.text


def test_a_csv_of_millions_of_rows_is_segmented_in_bounded_memory() -> None:
    """Six million short rows: block starts only, never a list of every row."""
    data = b"id,name\n" + b"1,a\n" * 6_000_000
    upload = _upload("rows.csv", data)
    extraction = extract(upload)
    assert _peak(lambda: extract(upload)) < 2 * len(data)
    segments = segment_extraction(extraction)
    assert len(segments) == len(data) // 3000  # blocks of about 3,000 characters
    assert all(s.indexed_text(extraction.text).startswith("id,name\n") for s in segments)


def test_a_csv_of_blank_lines_passes_the_dde_check_and_segments() -> None:
    """The DDE pattern once backtracked over every following newline from each line start
    (quadratic: 20,000 newlines took 14 s); it is linear now, and so is segmenting."""
    data = b"id,name\n" + b"\n" * 300_000 + b"=cmd|' /C calc'!A0\n"
    with pytest.raises(DocumentRefusedError) as raised:
        inspect_upload("blank.csv", data)
    assert raised.value.refusal is DocumentRefusal.ACTIVE_CONTENT
    upload = _upload("blank.csv", b"id,name\n" + b"\n" * 300_000 + b"1,a\n")
    extraction = extract(upload)
    assert reconstruct(extraction.text, segment_extraction(extraction)) == extraction.text


def test_a_huge_csv_header_is_not_repeated_in_full_before_every_segment() -> None:
    """The header prefix is capped: a 1 MB header line times thousands of segments would be
    gigabytes of indexed text (the fetchable text itself is untouched)."""
    header = ",".join(f"column{i}" for i in range(100_000)) + "\n"
    data = (header + "1,a\n" * 20_000).encode()
    extraction = extract(_upload("wide.csv", data))
    segments = segment_extraction(extraction)
    assert len(segments) > 10
    assert all(len(s.prefix) <= CSV_HEADER_PREFIX_CHARS + 1 for s in segments)
    assert reconstruct(extraction.text, segments) == extraction.text


def test_a_heading_with_a_long_run_of_blanks_is_linear_and_its_label_capped() -> None:
    """``# a<200,000 spaces>b``: the old lazy title pattern retried the trailing run from every
    position (quadratic); the label is display metadata and capped."""
    data = b"intro\n# a" + b" " * 200_000 + b"b\nbody\n"
    extraction = extract(_upload("wide.md", data))
    assert len(extraction.labels) == 2
    assert extraction.labels[1].startswith("a ")
    assert len(extraction.labels[1]) == LABEL_CHARS


def test_markdown_fences_are_counted_in_one_pass() -> None:
    """Headings inside fences do not split, however many fences there are (the old code
    counted every earlier fence for every heading)."""
    data = b"".join(b"```\n# inside %d\n```\n# outside %d\n" % (i, i) for i in range(20_000))
    extraction = extract(_upload("fenced.md", data))
    assert len(extraction.labels) == 20_001  # the untitled first unit, then each outside
    assert all(label.startswith("outside") for label in extraction.labels[1:])


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("long.txt", b"x" * 5000),
        ("long.md", b"# T\n" + b"x" * 5000),
        ("long.csv", b"a,b\n" + b"1,2\n" * 2000),
    ],
)
def test_text_longer_than_the_limit_is_refused(name: str, data: bytes) -> None:
    """``max_chars`` bounds every text format: TEXT_TOO_LONG, with its own remedy."""
    limits = ExtractionLimits(max_chars=4000)
    with pytest.raises(DocumentRefusedError) as raised:
        extract(_upload(name, data), limits=limits)
    assert raised.value.refusal is DocumentRefusal.TEXT_TOO_LONG
    assert "longer than the store's limit" in raised.value.remedy


def test_docx_text_longer_than_the_limit_is_refused() -> None:
    """DOCX compresses, so its text can outgrow its bytes: bounded while it is read."""
    from docx import Document

    document = Document()
    for _ in range(50):
        document.add_paragraph("lorem ipsum dolor sit amet " * 20)
    buffer = io.BytesIO()
    document.save(buffer)
    upload = _upload("long.docx", buffer.getvalue())
    assert len(extract(upload).text) > 20_000
    limits = ExtractionLimits(max_chars=20_000)
    assert _refusal(lambda: extract(upload, limits=limits)) is DocumentRefusal.TEXT_TOO_LONG


def test_pdf_text_and_page_count_are_bounded() -> None:
    """The sandbox child stops at ``max_chars``; pages count against the segment ceiling."""
    upload = _upload("report.pdf", text_pdf(["alpha " * 50, "beta " * 50, "gamma"]))
    extraction = extract(upload)
    assert extraction.labels == ("page 1", "page 2", "page 3")
    assert "gamma" in extraction.text
    short = ExtractionLimits(max_chars=400)
    assert _refusal(lambda: extract(upload, limits=short)) is DocumentRefusal.TEXT_TOO_LONG
    few = ExtractionLimits(max_segments=2)
    assert _refusal(lambda: extract(upload, limits=few)) is DocumentRefusal.TOO_MANY_SEGMENTS


def test_default_bounds_accept_a_full_size_ordinary_document() -> None:
    """A 24 MB prose text (the upload limit is 25 MB) stays under both default ceilings."""
    paragraph = b"Employees receive twenty-eight days of paid leave per year. " * 20 + b"\n\n"
    data = paragraph * (24 * MB // len(paragraph))
    extraction = extract(
        AcceptedUpload(display_name="big.txt", format=DocumentFormat.TXT, data=data, sha256="")
    )
    segments = segment_extraction(extraction)
    assert 0 < len(segments) <= DEFAULT_MAX_SEGMENTS
