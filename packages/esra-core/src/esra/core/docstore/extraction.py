"""Text extraction per format, producing the text and its natural segment boundaries.

PDF runs in a subprocess with memory and CPU limits and a wall-clock kill (pypdf has shipped
dozens of denial-of-service fixes; a hostile file must only ever fail itself). DOCX is read
with python-docx only after ``inspect_upload`` has checked the package (zip limits, no
DTDs). Text formats are decoded as UTF-8 (or UTF-16 with a byte-order mark).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable

import attrs

from esra.core.codes import DocumentRefusal
from esra.core.docstore.formats import DocumentFormat
from esra.core.docstore.refusals import DocumentRefusedError
from esra.core.docstore.segments import DEFAULT_MAX_CHARS, Segment, segment_text
from esra.core.docstore.upload import AcceptedUpload

__all__ = ["Extraction", "PdfLimits", "extract", "segment_extraction"]

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
PARAGRAPH_GROUP_CHARS = 1200
CSV_SEGMENT_CHARS = 3000


@attrs.frozen
class PdfLimits:
    """Sandbox limits for one PDF extraction subprocess."""

    memory_bytes: int = 768 * 1024 * 1024
    cpu_seconds: int = 30
    wall_seconds: float = 60.0


@attrs.frozen
class Extraction:
    """A document's extracted text with its natural unit starts, labels and CSV header."""

    text: str
    boundaries: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    header: str = ""
    group_chars: int = 0


def _decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    return data.decode("utf-8-sig")


def _plain(data: bytes) -> Extraction:
    text = _decode(data).replace("\r\n", "\n")
    starts = [m.end() for m in _PARAGRAPH_BREAK.finditer(text)]
    return Extraction(text=text, boundaries=tuple(starts), group_chars=PARAGRAPH_GROUP_CHARS)


def _markdown(data: bytes) -> Extraction:
    text = _decode(data).replace("\r\n", "\n")
    fences = [m.start() for m in _FENCE.finditer(text)]
    starts, labels = [], [""]
    for match in _HEADING.finditer(text):
        inside_code = sum(1 for f in fences if f < match.start()) % 2 == 1
        if not inside_code and match.start() > 0:
            starts.append(match.start())
            labels.append(match.group(2).strip())
        elif match.start() == 0:
            labels[0] = match.group(2).strip()
    return Extraction(text=text, boundaries=tuple(starts), labels=tuple(labels))


def _csv(data: bytes) -> Extraction:
    text = _decode(data).replace("\r\n", "\n")
    row_starts, offset, quotes = [], 0, 0
    for line in text.splitlines(keepends=True):
        if quotes % 2 == 0 and offset > 0:
            row_starts.append(offset)
        quotes += line.count('"')
        offset += len(line)
    header = text[: row_starts[0]] if row_starts else text
    boundaries, size = [], 0
    previous = row_starts[0] if row_starts else len(text)
    for start in [*row_starts[1:], len(text)]:
        size += start - previous
        if size > CSV_SEGMENT_CHARS:
            boundaries.append(previous)
            size = start - previous
        previous = start
    first_rows = row_starts[0] if row_starts else 0
    # The header travels with the first rows; later segments get it as an indexed prefix.
    return Extraction(
        text=text,
        boundaries=tuple(b for b in boundaries if b > first_rows),
        header=header if header.endswith("\n") else header + "\n",
    )


def _docx(data: bytes) -> Extraction:
    import io  # noqa: PLC0415 - python-docx is an optional extra

    from docx import Document  # noqa: PLC0415

    try:
        document = Document(io.BytesIO(data))
    except Exception as exc:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT, detail=f"python-docx: {type(exc).__name__}"
        ) from exc
    lines: list[str] = []
    starts: list[int] = []
    labels: list[str] = [""]
    offset = 0
    for block in document.iter_inner_content():
        if hasattr(block, "rows"):
            rows = [" | ".join(cell.text for cell in row.cells) for row in block.rows]
            chunk = "\n".join(rows)
        else:
            chunk = block.text
            style = (block.style.name if block.style is not None else "") or ""
            if style.startswith(("Heading", "Title")) and chunk.strip():
                if offset > 0:
                    starts.append(offset)
                    labels.append(chunk.strip())
                else:
                    labels[0] = chunk.strip()
        lines.append(chunk)
        offset += len(chunk) + 1
    return Extraction(text="\n".join(lines), boundaries=tuple(starts), labels=tuple(labels))


def _limit(limits: PdfLimits) -> Callable[[], None]:
    def apply() -> None:
        import resource  # noqa: PLC0415 - POSIX only, and only in the child

        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))

    return apply


def _pdf(data: bytes, limits: PdfLimits) -> Extraction:
    try:
        completed = subprocess.run(
            [sys.executable, "-I", "-m", "esra.core.docstore._pdf_worker"],
            input=data,
            capture_output=True,
            timeout=limits.wall_seconds,
            preexec_fn=_limit(limits),
            check=False,
            env={"PYTHONPATH": ":".join(sys.path)},
        )
    except subprocess.TimeoutExpired as exc:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT, detail="extraction exceeded its time limit"
        ) from exc
    try:
        result = json.loads(completed.stdout or b"{}")
    except ValueError:
        result = {}
    if "pages" not in result:
        refusal = DocumentRefusal(result.get("refusal", "MALFORMED_DOCUMENT"))
        detail = result.get("detail") or f"extractor exited with {completed.returncode}"
        raise DocumentRefusedError(refusal, detail=str(detail))
    pages = [str(p) for p in result["pages"]]
    starts, labels, offset = [], [], 0
    for number, page in enumerate(pages, start=1):
        starts.append(offset)
        labels.append(f"page {number}")
        offset += len(page) + 1
    return Extraction(text="\n".join(pages), boundaries=tuple(starts), labels=tuple(labels))


def extract(upload: AcceptedUpload, *, pdf_limits: PdfLimits | None = None) -> Extraction:
    """Extract ``upload``'s text and natural boundaries.

    Raises:
        DocumentRefusedError: ``MALFORMED_DOCUMENT`` or ``PASSWORD_PROTECTED`` when the content
            cannot be read safely — never a partial extraction.
    """
    match upload.format:
        case DocumentFormat.PDF:
            return _pdf(upload.data, pdf_limits or PdfLimits())
        case DocumentFormat.DOCX:
            return _docx(upload.data)
        case DocumentFormat.MD:
            return _markdown(upload.data)
        case DocumentFormat.CSV:
            return _csv(upload.data)
        case _:
            return _plain(upload.data)


def segment_extraction(
    extraction: Extraction, *, max_chars: int = DEFAULT_MAX_CHARS
) -> list[Segment]:
    """Segment an extraction by its format's rules (pages, headings, rows, paragraph groups)."""
    return segment_text(
        extraction.text,
        extraction.boundaries,
        labels=extraction.labels,
        max_chars=max_chars,
        min_chars=extraction.group_chars,
        prefix=extraction.header,
    )
