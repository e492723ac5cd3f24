"""A store document's segments concatenate, in ordinal order, to exactly its extracted text —
for every segmenter — and a fetch of it pages that text exactly.

Each property draws documents made of what breaks naive segmenters: blank and
whitespace-only lines, CRLF, headings (with closing runs, inside and outside fences), CSV
quoting with embedded newlines and doubled quotes, unicode beyond the BMP, combining marks,
and lines longer than a segment with and without spaces. A segment's fetchable content is
its slice; its label and the indexed CSV header prefix do not take part.
"""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esra.core._docstore.extraction import (
    Extraction,
    ExtractionLimits,
    extract,
    segment_extraction,
)
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.sandbox import CancelToken, ExtractionSandbox, SandboxLimits
from esra.core._docstore.segments import DEFAULT_MAX_SEGMENTS, Segment
from esra.core._docstore.upload import AcceptedUpload
from esra.core._fetch.refs import DocumentRefMinter
from esra.core._fetch.service import DocumentFetcher
from esra.core._fetch.tokens import DocumentLocator
from esra.core._pipeline.validation import MAX_LOOKUP_PARTS
from esra.core.codes import DocumentRefusal
from esra.core.fetch import Keyring
from esra.core.testing import (
    FakeClock,
    InMemoryAuditSink,
    InMemoryConfigRepository,
    InMemoryQuotaStore,
    InMemorySearchProvider,
)
from tests.core.factories import (
    EXPOSURE_ID,
    make_context,
    make_exposure,
    make_field,
    make_mapping,
    make_snapshot,
    make_source,
)

_WORDS = ["leave", "policy", "Zürich", "日本語", "emoji 🧪🏳️‍🌈", "e\u0301", "مرحبا", "a\tb", "x"]
_LONG = st.one_of(
    st.integers(1, 900).map(lambda n: "word " * n),  # a line longer than a segment, spaced
    st.integers(4000, 6000).map(lambda n: "y" * n),  # no break at all: cut at the limit
)


def _line() -> st.SearchStrategy[str]:
    word = st.sampled_from(_WORDS)
    words = st.lists(word, min_size=1, max_size=8).map(" ".join)
    return st.one_of(
        st.just(""),
        st.sampled_from([" ", "\t", " \t ", "\f"]),
        words,
        words.map(lambda w: f"# {w}"),
        words.map(lambda w: f"###### {w} ###"),
        st.sampled_from(["#", "##  ", "# #", "####### not a heading", "#no-space"]),
        st.sampled_from(["```", "~~~", "```python", "    ```"]),
        words.map(lambda w: f'"{w}, ""quoted""\nstill the cell",{w}'),
        st.sampled_from(['"unclosed,quote', '""', 'a,"b\n\nc",d', ",,,"]),
        _LONG,
        st.text(st.characters(codec="utf-8"), max_size=40),
    )


@st.composite
def _document(draw: st.DrawFn) -> str:
    """Lines joined by LF, CRLF or a mix, sometimes without a final newline."""
    lines = draw(st.lists(_line(), max_size=60))
    newline = draw(st.sampled_from(["\n", "\r\n", "mixed"]))
    if newline == "mixed":
        ends = draw(st.lists(st.sampled_from(["\n", "\r\n"]), min_size=len(lines)))
        text = "".join(line + end for line, end in zip(lines, ends, strict=False))
    else:
        text = newline.join(lines)
    return text + draw(st.sampled_from(["", "\n", "\r\n", "\n\n\n"]))


def _upload(fmt: DocumentFormat, data: bytes) -> AcceptedUpload:
    # Extraction is what is under test: the upload checks have their own tests.
    return AcceptedUpload(display_name=f"doc.{fmt.value}", format=fmt, data=data, sha256="0" * 64)


def _encoded(text: str, encoding: str) -> bytes:
    if encoding == "utf-8-sig":
        return b"\xef\xbb\xbf" + text.encode("utf-8")
    return text.encode(encoding)  # "utf-16" writes its byte-order mark


def _segmented(extraction: Extraction, max_chars: int) -> list[Segment] | None:
    """The segments, or ``None`` when refused for their number — which only a text longer
    than the ceiling can be, as every segment holds at least one character."""
    refusal = None
    try:
        return segment_extraction(extraction, max_chars=max_chars)
    except DocumentRefusedError as refused:
        refusal = refused.refusal
    assert refusal is DocumentRefusal.TOO_MANY_SEGMENTS
    assert len(extraction.text) > extraction.max_segments
    return None


def _assert_partition(extraction: Extraction, max_chars: int) -> None:
    """Contiguous, non-empty, bounded slices, ordinals in order, joining to the text."""
    segments = _segmented(extraction, max_chars)
    if segments is None:
        return
    text = extraction.text
    assert "".join(s.body(text) for s in sorted(segments, key=lambda s: s.ordinal)) == text
    position = 0
    for ordinal, segment in enumerate(segments):
        assert (segment.ordinal, segment.start) == (ordinal, position)
        assert 0 < segment.end - segment.start <= max_chars
        position = segment.end
    assert position == len(text)
    assert len(segments) <= extraction.max_segments


_TEXT_FORMATS = st.sampled_from([DocumentFormat.TXT, DocumentFormat.MD, DocumentFormat.CSV])
_MAX_CHARS = st.sampled_from([1, 7, 64, 500, 4000])  # 1: every character a segment


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_document(),
    fmt=_TEXT_FORMATS,
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16"]),
    max_chars=_MAX_CHARS,
)
def test_text_markdown_and_csv_segments_concatenate_to_the_extracted_text(
    text: str, fmt: DocumentFormat, encoding: str, max_chars: int
) -> None:
    """And the extracted text is the decoded file with CRLF as LF: nothing else changes."""
    extraction = extract(_upload(fmt, _encoded(text, encoding)))
    assert extraction.text == text.replace("\r\n", "\n")
    _assert_partition(extraction, max_chars)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_document(), fmt=_TEXT_FORMATS, max_segments=st.integers(1, 12))
def test_a_segment_ceiling_refuses_whole_or_partitions_exactly(
    text: str, fmt: DocumentFormat, max_segments: int
) -> None:
    """The ceiling never yields a partial document: refused, or every character kept."""
    limits = ExtractionLimits(max_segments=max_segments)
    refusal = None
    try:
        extraction = extract(_upload(fmt, text.encode()), limits=limits)
    except DocumentRefusedError as refused:
        refusal = refused.refusal
    if refusal is not None:
        assert refusal is DocumentRefusal.TOO_MANY_SEGMENTS
        return
    _assert_partition(extraction, 200)


class _PagesSandbox(ExtractionSandbox):
    """Answers as the PDF child does, with given pages: the page join is under test here."""

    def __init__(self, pages: list[str]) -> None:
        super().__init__()
        self._pages = pages

    def extract(
        self,
        data: bytes,
        limits: SandboxLimits,
        *,
        reader: DocumentFormat,
        options: Mapping[str, object] | None = None,
        holder: str | None = None,
        cancel: CancelToken | None = None,
    ) -> dict[str, object]:
        del data, limits, reader, options, holder
        return {"pages": list(self._pages)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages=st.lists(_document(), max_size=12), max_chars=_MAX_CHARS)
def test_pdf_page_segments_concatenate_to_the_extracted_text(
    pages: list[str], max_chars: int
) -> None:
    """Empty pages, pages of blank lines and a trailing empty page included."""
    sandbox = _PagesSandbox(pages)
    extraction = extract(_upload(DocumentFormat.PDF, b"%PDF-1.7"), sandbox=sandbox)
    assert extraction.text == "\n".join(pages)
    _assert_partition(extraction, max_chars)


def _xml_safe(text: str) -> str:
    """What a .docx paragraph can hold: no C0 controls but tab and newline, no surrogates."""
    return "".join(
        c
        for c in text.replace("\r", "")
        if c in "\t\n" or (unicodedata.category(c) not in {"Cc", "Cs"} and c not in "\ufffe\uffff")
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    blocks=st.lists(
        st.tuples(st.sampled_from(["Normal", "Heading 1", "Heading 2", "Title", "table"]), _line()),
        max_size=20,
    ),
    max_chars=_MAX_CHARS,
)
def test_docx_section_segments_concatenate_to_the_extracted_text(
    blocks: list[tuple[str, str]], max_chars: int
) -> None:
    """Headings (empty ones too), body paragraphs with line breaks, and tables."""
    docx = pytest.importorskip("docx")
    document = docx.Document()
    for style, raw in blocks:
        text = _xml_safe(raw)
        if style == "table":
            table = document.add_table(rows=2, cols=2)
            table.cell(0, 0).text, table.cell(1, 1).text = text, text[:3]
        else:
            document.add_paragraph(text, style=style)
    data = io.BytesIO()
    document.save(data)
    extraction = extract(_upload(DocumentFormat.DOCX, data.getvalue()))
    _assert_partition(extraction, max_chars)


# -- fetch: a store document's segments, one row each, paged through DocumentFetcher --------

_ROWS_MAPPING = make_mapping(
    "m-s-1",
    source_id="s-1",
    fields=(make_field("title"), make_field("body"), make_field("n", searchable=False)),
    part_order_column="col_n",
)


class _StoreWorld:
    """One document stored as its segments, and a fetcher with a reference to it."""

    def __init__(self, bodies: list[str], *, size_cap_chars: int = 1_000_000) -> None:
        rows = [
            {"col_id": "doc-1", "col_title": "doc.md", "col_body": body, "col_n": n}
            for n, body in reversed(list(enumerate(bodies)))  # stored in any order
        ]
        clock = FakeClock()
        snapshot = make_snapshot(
            [make_source("s-1")],
            mappings=[_ROWS_MAPPING],
            exposure=make_exposure(fetch_enabled=True, size_cap_chars=size_cap_chars),
        )
        keyring = Keyring.generate("k1")
        self.fetcher = DocumentFetcher(
            config=InMemoryConfigRepository([snapshot]),
            providers={"s-1": InMemorySearchProvider({"m-s-1": rows})},
            audit=InMemoryAuditSink(),
            keyring=keyring,
            quota=InMemoryQuotaStore(clock),
            hourly_chars=10**9,
            clock=clock,
        )
        self.ctx = make_context()
        minter = DocumentRefMinter(keyring=keyring, clock=clock, ctx=self.ctx)
        self.ref = minter.mint(EXPOSURE_ID, DocumentLocator("s-1", "m-s-1", "doc-1"))

    async def fetch(self, offset: int, max_chars: int) -> Any:
        return await self.fetcher.fetch(self.ctx, self.ref, offset=offset, max_chars=max_chars)


def _stored(text: str, fmt: DocumentFormat, max_chars: int) -> tuple[str, list[str]]:
    extraction = extract(_upload(fmt, text.encode()))
    segments = segment_extraction(extraction, max_chars=max_chars)
    return extraction.text, [s.body(extraction.text) for s in segments]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_document(),
    fmt=_TEXT_FORMATS,
    max_chars=st.sampled_from([64, 500, 4000]),
    offset=st.integers(0, 20_000),
    page_chars=st.integers(1, 20_000),
)
async def test_a_fetch_page_is_the_exact_slice_with_an_exact_total(
    text: str, fmt: DocumentFormat, max_chars: int, offset: int, page_chars: int
) -> None:
    """At any offset and size, past the end included: ``text[offset:offset + size]``."""
    extracted, bodies = _stored(text, fmt, max_chars)
    if not bodies:
        return  # an empty document has no segments, so no row to fetch
    page = await _StoreWorld(bodies).fetch(offset, page_chars)
    assert page.text == extracted[offset : offset + page_chars]
    assert page.total_chars == len(extracted)
    assert page.has_more is (offset + page_chars < len(extracted))
    assert page.offset == min(offset, len(extracted))


def _carried(page: Any) -> int:
    """What a response's title and fields take of the size cap (names and values)."""
    return len(page.title) + sum(len(name) + len(value) for name, value in page.fields.items())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_document(),
    fmt=_TEXT_FORMATS,
    page_chars=st.integers(1, 3000),
    text_room=st.integers(1, 3000),
)
async def test_paging_a_fetch_to_the_end_reproduces_the_extracted_text(
    text: str, fmt: DocumentFormat, page_chars: int, text_room: int
) -> None:
    """Following ``next_offset`` from 0, under the exposure's size cap, rebuilds the text,
    and every response — title, fields and page — fits the cap.

    The cap is drawn as the title and fields plus ``text_room`` characters of text: a cap
    they alone fill leaves no page to serve (``tests/core/fetch/test_fetch_size_cap.py``).
    """
    extracted, bodies = _stored(text, fmt, 500)
    if not bodies:
        return
    # At most about 50 pages: tiny pages are drawn for short texts (every page is a fetch,
    # and each is audited and leak-scanned).
    floor = -(-len(extracted) // 50)
    page_chars, text_room = max(page_chars, floor), max(text_room, floor)
    carried = _carried(await _StoreWorld(bodies).fetch(0, 1))
    size_cap = carried + text_room
    world = _StoreWorld(bodies, size_cap_chars=size_cap)
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await world.fetch(offset, page_chars)
        assert page.total_chars == len(extracted)
        assert len(page.text) == min(page_chars, text_room, len(extracted) - offset)
        assert _carried(page) + len(page.text) <= size_cap
        pages.append(page.text)
        offset = page.next_offset
    assert "".join(pages) == extracted
    assert len(pages) == -(-len(extracted) // min(page_chars, text_room))


def test_a_fetch_reads_every_segment_a_store_document_may_have() -> None:
    """The lookup's part cap is not below the store's segment ceiling, so no store document
    is fetched with an unknown total."""
    assert MAX_LOOKUP_PARTS >= DEFAULT_MAX_SEGMENTS


async def test_a_record_of_exactly_the_part_cap_has_an_exact_total() -> None:
    """The lookup reads one part past the cap: a record of the cap is complete."""
    world = _StoreWorld(["ab"] * MAX_LOOKUP_PARTS)
    page = await world.fetch(2 * MAX_LOOKUP_PARTS - 3, 10)
    assert (page.text, page.total_chars, page.has_more) == ("bab", 2 * MAX_LOOKUP_PARTS, False)


async def test_a_record_past_the_part_cap_pages_what_was_read_and_then_stops() -> None:
    """More parts than a fetch reads: the total is unknown, and paging ends at the last part
    read instead of returning the same empty page forever."""
    world = _StoreWorld(["ab"] * (MAX_LOOKUP_PARTS + 5))
    read = 2 * MAX_LOOKUP_PARTS
    last = await world.fetch(read - 1, 10)
    assert (last.text, last.total_chars, last.has_more) == ("b", None, True)
    beyond = await world.fetch(last.next_offset, 10)
    assert (beyond.text, beyond.total_chars, beyond.has_more) == ("", None, False)
