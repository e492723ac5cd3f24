"""Text extraction per format, producing the text and its natural segment boundaries.

PDF runs in a child process of its own with memory and CPU limits and a wall-clock kill
(pypdf has shipped dozens of denial-of-service fixes; a hostile file must only ever fail
itself), forked by a long-lived sandbox server that already imported pypdf. DOCX is read
with python-docx only after ``inspect_upload`` has checked the package (zip limits, no
DTDs). Text formats are decoded as UTF-8 (or UTF-16 with a byte-order mark).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import attrs

from esra.core.codes import DocumentRefusal
from esra.core.docstore.formats import DocumentFormat
from esra.core.docstore.refusals import DocumentRefusedError
from esra.core.docstore.segments import DEFAULT_MAX_CHARS, Segment, segment_text
from esra.core.docstore.upload import AcceptedUpload

__all__ = [
    "Extraction",
    "PdfLimits",
    "extract",
    "sandbox_peak_rss_kb",
    "segment_extraction",
]

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


class _Sandbox:
    """The client side of ``_pdf_forkserver``: one server per parent process, one request at
    a time, restarted when it dies (or when this process was forked)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self.peak_rss_kb = 0

    def _start(self) -> subprocess.Popen[bytes]:
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "PATH": os.defpath}
        return subprocess.Popen(
            [sys.executable, "-m", "esra.core.docstore._pdf_forkserver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def extract(self, data: bytes, limits: PdfLimits) -> dict[str, object]:
        header = {
            "size": len(data),
            "memory": limits.memory_bytes,
            "cpu": limits.cpu_seconds,
            "wall": limits.wall_seconds,
        }
        with self._lock:
            if (
                self._server is None
                or self._server.poll() is not None
                or self._owner != os.getpid()
            ):
                self._server, self._owner = self._start(), os.getpid()
            server = self._server
            assert server.stdin is not None
            assert server.stdout is not None
            try:
                server.stdin.write(json.dumps(header).encode() + b"\n" + data)
                server.stdin.flush()
                line = server.stdout.readline()
                answer = json.loads(line) if line else None
            except (OSError, ValueError):
                answer = None
            if not isinstance(answer, dict):
                # The server itself died: this document fails, the next request restarts it.
                server.kill()
                self._server = None
                return {"refusal": "MALFORMED_DOCUMENT", "detail": "sandbox server died"}
            peak = answer.get("sandbox_peak_kb")
            if isinstance(peak, int):
                self.peak_rss_kb = max(self.peak_rss_kb, peak)
            return answer


_SANDBOX = _Sandbox()


def sandbox_peak_rss_kb() -> int:
    """The largest resident size any PDF sandbox child of this process reached, in KiB."""
    return _SANDBOX.peak_rss_kb


def _pdf(data: bytes, limits: PdfLimits) -> Extraction:
    result = _SANDBOX.extract(data, limits)
    if "pages" not in result or not isinstance(result["pages"], list):
        refusal = DocumentRefusal(str(result.get("refusal", "MALFORMED_DOCUMENT")))
        raise DocumentRefusedError(refusal, detail=str(result.get("detail", "")))
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
