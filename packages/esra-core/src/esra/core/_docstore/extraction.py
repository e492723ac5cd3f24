"""Text extraction per format, producing the text and its natural segment boundaries.

PDF and DOCX are parsed in a child process of their own with memory and CPU limits and a
wall-clock kill, forked by a sandbox server that already imported pypdf and python-docx
(``sandbox``): both readers parse untrusted bytes (pypdf has shipped dozens of
denial-of-service fixes; python-docx can spend seconds of CPU on a small package), and a
hostile file must only ever fail itself. A DOCX's package checks and reading happen there
(``docx_text``); what comes back is checked against the limits again before it is used.
A caller that abandons an extraction cancels it (``cancel``): the child is killed then,
not at its limits. Text formats are decoded as UTF-8 (or UTF-16 with a byte-order mark).

Every format is bounded by ``ExtractionLimits``: the text's length and the number of units
are checked while they are found, in one linear pass, and only unit starts are kept — never
a list of every line, row or blank line — so a file of a million headings or rows fails
fast with ``TOO_MANY_SEGMENTS`` instead of exhausting memory.
"""

from __future__ import annotations

import re

import attrs

from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.sandbox import (
    CancelToken,
    ExtractionSandbox,
    SandboxLimits,
    answer_refusal,
    default_sandbox,
)
from esra.core._docstore.segments import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_SEGMENTS,
    Segment,
    segment_text,
    too_many_segments,
)
from esra.core._docstore.upload import AcceptedUpload
from esra.core._docstore.zipguard import ZipLimits
from esra.core._encodable import encodable
from esra.core.codes import DocumentRefusal

__all__ = [
    "Extraction",
    "ExtractionLimits",
    "SandboxLimits",
    "UnitStarts",
    "extract",
    "sandbox_peak_rss_kb",
    "segment_extraction",
    "text_too_long",
    "unit_label",
]

# One pass over the lines that matter: a fence toggles code, a heading outside code starts a
# unit. The title is the rest of the line ([^\n]+ is linear; the former lazy title with an
# optional trailing run backtracked quadratically on a long run of blanks).
_MARKDOWN_LINE = re.compile(r"^(?:(?P<fence>```|~~~)|#{1,6}[ \t]+(?P<title>[^\n]+))", re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# One CSV record: unquoted runs and quoted runs (which may hold newlines) up to a newline.
# Possessive throughout, so it never backtracks; an unclosed quote runs to the end.
_CSV_RECORD = re.compile(r'(?:[^"\n]++|"[^"]*+"?)*+\n?')
# As many whole, newline-ended records as fit (matched with an end position: a record cut by
# it is not whole, so it is left out).
_CSV_RECORDS = re.compile(r'(?:(?:[^"\n]++|"[^"]*+")*+\n)*+')
PARAGRAPH_GROUP_CHARS = 1200
CSV_SEGMENT_CHARS = 3000
# Labels are display metadata stored with every segment of their unit: a one-megabyte
# heading line must not be copied into each of its segments.
LABEL_CHARS = 200
# The header repeated before every CSV segment is indexed, not part of the document: capped
# so a huge header line cannot be multiplied by the number of segments.
CSV_HEADER_PREFIX_CHARS = 2000


@attrs.frozen
class ExtractionLimits:
    """Bounds on what one document may extract to, whatever its format.

    ``max_chars``: the default upload limit (25 MB) decodes to at most 25 M characters of
    text; PDF and DOCX compress, so 32 Mi leaves them headroom while a decompression-amplified
    text is refused (``TEXT_TOO_LONG``). ``max_segments``: see ``DEFAULT_MAX_SEGMENTS``
    (``TOO_MANY_SEGMENTS``). Both are checked while extracting, before the text or its
    boundaries are materialised beyond them. ``zip``: the package limits a ``.docx`` is
    checked against again, in its sandbox child, before python-docx opens it (the upload's,
    by default).
    """

    max_chars: int = 32 * 1024 * 1024
    max_segments: int = DEFAULT_MAX_SEGMENTS
    zip: ZipLimits = attrs.field(factory=ZipLimits)


@attrs.frozen
class Extraction:
    """A document's extracted text with its natural unit starts, labels and CSV header."""

    text: str
    boundaries: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    header: str = ""
    group_chars: int = 0
    max_segments: int = DEFAULT_MAX_SEGMENTS


def text_too_long(limits: ExtractionLimits) -> DocumentRefusedError:
    return DocumentRefusedError(
        DocumentRefusal.TEXT_TOO_LONG, detail=f"more than {limits.max_chars} characters"
    )


def _decode(data: bytes, limits: ExtractionLimits) -> str:
    # No character takes more than four bytes: a file that must decode to too many is refused
    # before it is decoded.
    if len(data) // 4 > limits.max_chars:
        raise text_too_long(limits)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16")
    else:
        text = data.decode("utf-8-sig")
    # ``replace`` returns the same object when there is no CRLF: no second copy then.
    text = text.replace("\r\n", "\n")
    if len(text) > limits.max_chars:
        raise text_too_long(limits)
    return text


def unit_label(title: str) -> str:
    """A unit's display label: its title, stripped and capped at ``LABEL_CHARS``."""
    return title.strip()[:LABEL_CHARS]


class UnitStarts:
    """Unit starts collected under the segment ceiling (each unit is at least one segment)."""

    def __init__(self, limits: ExtractionLimits) -> None:
        self.starts: list[int] = []
        self._limit = limits.max_segments

    def add(self, start: int) -> None:
        if len(self.starts) + 1 >= self._limit:  # unit 0 is implied
            raise too_many_segments(self._limit)
        self.starts.append(start)


def _plain(data: bytes, limits: ExtractionLimits) -> Extraction:
    text = _decode(data, limits)
    # Paragraph grouping as the breaks stream past: only group starts are kept, never a list
    # of every break (a file of blank lines has millions).
    units, group_start = UnitStarts(limits), 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        if match.end() - group_start >= PARAGRAPH_GROUP_CHARS and match.end() < len(text):
            units.add(match.end())
            group_start = match.end()
    return Extraction(
        text=text,
        boundaries=tuple(units.starts),
        group_chars=PARAGRAPH_GROUP_CHARS,
        max_segments=limits.max_segments,
    )


def _markdown(data: bytes, limits: ExtractionLimits) -> Extraction:
    text = _decode(data, limits)
    units, labels, inside_code = UnitStarts(limits), [""], False
    for match in _MARKDOWN_LINE.finditer(text):
        if match.group("fence") is not None:
            inside_code = not inside_code
            continue
        if inside_code:
            continue
        raw = match.group("title")
        # A closing run of #s is not part of the title ("## Part ##"), unless it is all of it.
        title = unit_label(raw.rstrip(" \t#") or raw[:1])
        if match.start() == 0:
            labels[0] = title
        else:
            units.add(match.start())
            labels.append(title)
    return Extraction(
        text=text,
        boundaries=tuple(units.starts),
        labels=tuple(labels),
        max_segments=limits.max_segments,
    )


def _csv(data: bytes, limits: ExtractionLimits) -> Extraction:
    """Header-plus-rows blocks: a block takes whole records while it stays within
    ``CSV_SEGMENT_CHARS``; a record longer than that is a block of its own.

    Each block's records are matched in one regex call over a window of the block's size,
    so the work in Python is per block, never per row (a file of blank lines has millions).
    """
    text = _decode(data, limits)
    units = UnitStarts(limits)
    first = _CSV_RECORD.match(text)
    header_end = first.end() if first is not None else len(text)
    block = header_end
    while block + CSV_SEGMENT_CHARS < len(text):
        fitting = _CSV_RECORDS.match(text, block, block + CSV_SEGMENT_CHARS)
        following = fitting.end() if fitting is not None else block
        if following == block:  # one record longer than a block: it is the block
            record = _CSV_RECORD.match(text, block)
            following = record.end() if record is not None and record.end() > block else len(text)
        if following >= len(text):
            break
        units.add(following)
        block = following
    header = text[: min(header_end, CSV_HEADER_PREFIX_CHARS)]
    # The header travels with the first rows; later segments get it as an indexed prefix.
    return Extraction(
        text=text,
        boundaries=tuple(units.starts),
        header=header if header.endswith("\n") else header + "\n",
        max_segments=limits.max_segments,
    )


def sandbox_peak_rss_kb() -> int:
    """The largest resident size any sandbox child of this process reached, in KiB."""
    return default_sandbox().peak_rss_kb


def _pdf(
    data: bytes,
    limits: SandboxLimits,
    extraction_limits: ExtractionLimits,
    sandbox: ExtractionSandbox,
    *,
    holder: str | None,
    cancel: CancelToken | None,
) -> Extraction:
    bounded = attrs.evolve(limits, max_chars=min(limits.max_chars, extraction_limits.max_chars))
    result = sandbox.extract(data, bounded, reader=DocumentFormat.PDF, holder=holder, cancel=cancel)
    if "pages" not in result or not isinstance(result["pages"], list):
        raise answer_refusal(result)
    pages = [encodable(str(p)) for p in result["pages"]]  # pypdf may decode to surrogates
    if len(pages) > extraction_limits.max_segments:
        raise too_many_segments(extraction_limits.max_segments)
    starts, labels, offset = [], [], 0
    for number, page in enumerate(pages, start=1):
        starts.append(offset)
        labels.append(f"page {number}")
        offset += len(page) + 1
    if offset > extraction_limits.max_chars + 1:
        raise text_too_long(extraction_limits)
    return Extraction(
        text="\n".join(pages),
        boundaries=tuple(starts),
        labels=tuple(labels),
        max_segments=extraction_limits.max_segments,
    )


def _docx(
    data: bytes,
    limits: SandboxLimits,
    extraction_limits: ExtractionLimits,
    sandbox: ExtractionSandbox,
    *,
    holder: str | None,
    cancel: CancelToken | None,
) -> Extraction:
    bounded = attrs.evolve(limits, max_chars=min(limits.max_chars, extraction_limits.max_chars))
    options = {
        "segments": extraction_limits.max_segments,
        "zip": attrs.asdict(extraction_limits.zip),
    }
    result = sandbox.extract(
        data, bounded, reader=DocumentFormat.DOCX, options=options, holder=holder, cancel=cancel
    )
    text, starts, labels = result.get("text"), result.get("boundaries"), result.get("labels")
    if not (
        isinstance(text, str)
        and isinstance(starts, list)
        and all(type(s) is int for s in starts)
        and isinstance(labels, list)
        and all(isinstance(label, str) for label in labels)
    ):
        raise answer_refusal(result)
    # The child is trusted with nothing: its answer must be an extraction within our limits.
    if len(text) > bounded.max_chars:
        raise text_too_long(extraction_limits)
    if len(starts) + 1 > extraction_limits.max_segments:
        raise too_many_segments(extraction_limits.max_segments)
    # Unit 0 starts at 0: each later start is past the one before it and within the text.
    ordered = all(a < b for a, b in zip([0, *starts], [*starts, len(text) + 1], strict=True))
    if not ordered or len(labels) != len(starts) + 1:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT, detail="sandbox answer out of shape"
        )
    return Extraction(
        text=encodable(text),
        boundaries=tuple(starts),
        labels=tuple(encodable(label[:LABEL_CHARS]) for label in labels),
        max_segments=extraction_limits.max_segments,
    )


def extract(
    upload: AcceptedUpload,
    *,
    sandbox_limits: SandboxLimits | None = None,
    limits: ExtractionLimits | None = None,
    sandbox: ExtractionSandbox | None = None,
    holder: str | None = None,
    cancel: CancelToken | None = None,
) -> Extraction:
    """Extract ``upload``'s text and natural boundaries.

    Args:
        upload: an inspected upload.
        sandbox_limits: the limits of the child a PDF or DOCX is parsed in.
        limits: bounds on the text and its units, for every format.
        sandbox: the extraction sandbox server to use (its owner closes it); the process-wide one,
            closed at exit, by default.
        holder: whom its server is lent to (the tenant): no holder is lent every server.
        cancel: cancels a PDF's or DOCX's extraction from another thread: its sandbox child
            is killed, with all it started (text formats are read here, and not cancelled).

    Raises:
        DocumentRefusedError: ``MALFORMED_DOCUMENT`` or ``PASSWORD_PROTECTED`` when the content
            cannot be read safely, ``TEXT_TOO_LONG`` or ``TOO_MANY_SEGMENTS`` past ``limits``
            — never a partial extraction.
        MissingExtraError: PDF or DOCX without the ``documents`` extra installed.
        ExtractionCancelledError: ``cancel`` was cancelled while a PDF or DOCX was read.
    """
    limits = limits or ExtractionLimits()
    match upload.format:
        case DocumentFormat.PDF:
            return _pdf(
                upload.data,
                sandbox_limits or SandboxLimits(),
                limits,
                sandbox or default_sandbox(),
                holder=holder,
                cancel=cancel,
            )
        case DocumentFormat.DOCX:
            return _docx(
                upload.data,
                sandbox_limits or SandboxLimits(),
                limits,
                sandbox or default_sandbox(),
                holder=holder,
                cancel=cancel,
            )
        case DocumentFormat.MD:
            return _markdown(upload.data, limits)
        case DocumentFormat.CSV:
            return _csv(upload.data, limits)
        case _:
            return _plain(upload.data, limits)


def segment_extraction(
    extraction: Extraction, *, max_chars: int = DEFAULT_MAX_CHARS
) -> list[Segment]:
    """Segment an extraction by its format's rules (pages, headings, rows, paragraph groups).

    Raises:
        DocumentRefusedError: ``TOO_MANY_SEGMENTS`` past the extraction's segment ceiling.
    """
    return segment_text(
        extraction.text,
        extraction.boundaries,
        labels=extraction.labels,
        max_chars=max_chars,
        min_chars=extraction.group_chars,
        prefix=extraction.header,
        max_segments=extraction.max_segments,
    )
