"""Extraction of every accepted real document, matched against expected texts where known."""

from __future__ import annotations

import difflib
import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from esra.core._docstore.extraction import (
    LABEL_CHARS,
    ExtractionLimits,
    SandboxLimits,
    extract,
    segment_extraction,
)
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.ingestion import IngestionWorker
from esra.core._docstore.refusals import DocumentRefusedError
from esra.core._docstore.sandbox import CancelToken, ExtractionSandbox
from esra.core._docstore.segments import reconstruct
from esra.core._docstore.upload import AcceptedUpload, inspect_upload
from esra.core.codes import DocumentRefusal
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository
from tests._external import shared_data

EXPECTED = "documents/textract_with_expected_text"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


@pytest.mark.external_data
@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ("docx/raw_text.docx", "docx/raw_text.txt"),
        ("pdf/raw_text.pdf", "pdf/raw_text-m=pdftotext.txt"),
        ("txt/raw_text.txt", "txt/raw_text.txt"),
        ("csv/raw_text.csv", "csv/raw_text.txt"),
    ],
)
def test_textract_expected_texts_are_matched(document: str, expected: str) -> None:
    """The words extracted are textract's ground truth, in order (PDF line-break hyphenation
    may join or split a word: at least 97 % of the sequence must agree)."""
    path = shared_data(f"{EXPECTED}/{document}")
    extraction = extract(inspect_upload(path.name, path.read_bytes()))
    want = _words(shared_data(f"{EXPECTED}/{expected}").read_text(encoding="utf-8"))
    got = _words(extraction.text)
    assert difflib.SequenceMatcher(a=got, b=want, autojunk=False).ratio() >= 0.97


def _extract_outcome(path: Path) -> str:
    try:
        upload = inspect_upload(path.name, path.read_bytes())
    except DocumentRefusedError:
        return "refused at upload"
    try:
        extraction = extract(upload)
    except DocumentRefusedError as refused:
        return refused.refusal
    segments = segment_extraction(extraction)
    return "extracted" if reconstruct(extraction.text, segments) == extraction.text else "lossy"


@pytest.mark.external_data
@pytest.mark.slow
def test_every_accepted_real_document_extracts_or_fails_classified() -> None:
    """Each accepted file either yields segments that rebuild its text exactly, or fails with
    MALFORMED_DOCUMENT / PASSWORD_PROTECTED — never an unclassified error or a hang."""
    root = shared_data("documents")
    outcomes = [_extract_outcome(p) for p in sorted(root.rglob("*")) if p.is_file()]
    extracted = outcomes.count("extracted")
    failed = outcomes.count(DocumentRefusal.MALFORMED_DOCUMENT) + outcomes.count(
        DocumentRefusal.PASSWORD_PROTECTED
    )
    assert extracted + failed + outcomes.count("refused at upload") == len(outcomes)
    assert extracted > 400
    assert failed > 10


@pytest.mark.external_data
def test_a_password_protected_pdf_is_refused_with_a_remedy() -> None:
    """An AES-encrypted PDF needing a user password fails as PASSWORD_PROTECTED."""
    path = shared_data(
        "documents/pdf/py-pdf-sample-files/005-libreoffice-writer-password/libreoffice-writer-password.pdf"
    )
    with pytest.raises(DocumentRefusedError) as raised:
        extract(inspect_upload(path.name, path.read_bytes()))
    assert raised.value.refusal is DocumentRefusal.PASSWORD_PROTECTED
    assert "password" in raised.value.remedy.lower()


def _pdf_upload() -> AcceptedUpload:
    return AcceptedUpload(
        display_name="x.pdf", format=DocumentFormat.PDF, data=b"%PDF-1.4\n", sha256="0"
    )


def test_the_pdf_subprocess_is_killed_at_its_wall_clock_deadline() -> None:
    """A stuck extraction fails its document with MALFORMED_DOCUMENT instead of hanging."""
    with pytest.raises(DocumentRefusedError) as raised:
        extract(_pdf_upload(), sandbox_limits=SandboxLimits(wall_seconds=0.001))
    assert raised.value.refusal is DocumentRefusal.MALFORMED_DOCUMENT


def test_a_pdf_subprocess_out_of_memory_fails_only_its_document() -> None:
    """With too little address space the child dies; the parent classifies and goes on."""
    with pytest.raises(DocumentRefusedError) as raised:
        extract(_pdf_upload(), sandbox_limits=SandboxLimits(memory_bytes=32 * 1024 * 1024))
    assert raised.value.refusal is DocumentRefusal.MALFORMED_DOCUMENT


def test_markdown_headings_inside_code_fences_do_not_split() -> None:
    """Only real headings are unit boundaries."""
    text = b"# Title\nintro\n```\n# not a heading\n```\n## Part\nbody\n"
    extraction = extract(inspect_upload("a.md", text))
    assert extraction.labels == ("Title", "Part")
    assert len(segment_extraction(extraction)) == 2


def test_csv_segments_repeat_the_header() -> None:
    """Every CSV segment after the first is indexed with the header line."""
    rows = "".join(f'{i},"text, with comma {i}"\n' for i in range(400))
    data = ("id,body\n" + rows).encode()
    extraction = extract(inspect_upload("t.csv", data))
    segments = segment_extraction(extraction)
    assert len(segments) > 1
    assert all(s.indexed_text(extraction.text).startswith("id,body\n") for s in segments)
    assert reconstruct(extraction.text, segments) == extraction.text


def test_docx_headings_start_segments() -> None:
    """Word headings are unit boundaries with their text as label."""
    from docx import Document

    document = Document()
    document.add_heading("Leave", level=1)
    document.add_paragraph("Employees get 28 days.")
    document.add_heading("Travel", level=1)
    document.add_paragraph("Book through the desk.")
    buffer = io.BytesIO()
    document.save(buffer)
    extraction = extract(inspect_upload("policy.docx", buffer.getvalue()))
    assert extraction.labels == ("Leave", "Travel")
    bodies = [s.body(extraction.text) for s in segment_extraction(extraction)]
    assert bodies[1].startswith("Travel")
    assert zipfile.is_zipfile(io.BytesIO(buffer.getvalue()))


def docx_python_docx_cannot_read() -> bytes:
    """A Word package python-docx opens but cannot read: a paragraph's style has type ``"x"``.

    The XML is well formed, so every upload check passes; looking the style up (to find
    headings) raises.
    """
    from docx import Document

    document = Document()
    document.add_paragraph("Quarterly report", style="Heading 1")
    buffer = io.BytesIO()
    document.save(buffer)
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "word/styles.xml":
                heading = b'w:type="paragraph" w:styleId="Heading1"'
                assert heading in data
                data = data.replace(heading, b'w:type="x" w:styleId="Heading1"', 1)
            target.writestr(info.filename, data)
    return out.getvalue()


def test_a_docx_python_docx_opens_but_cannot_read_is_malformed() -> None:
    """Reading the content, not only opening the package, is classified: a bad style type
    is ``MALFORMED_DOCUMENT``, never an unclassified error."""
    upload = inspect_upload("report.docx", docx_python_docx_cannot_read())
    assert upload.breach is None
    with pytest.raises(DocumentRefusedError) as raised:
        extract(upload)
    assert raised.value.refusal is DocumentRefusal.MALFORMED_DOCUMENT


def test_the_sandbox_warms_up_on_a_strictly_valid_pdf_with_text() -> None:
    """The server's warm-up document must take pypdf's text path (fonts, content streams), or
    every child would still set that up again; strict parsing proves its structure exact."""
    from pypdf import PdfReader

    from esra.core._docstore._sandbox_server import WARM_UP_PDF

    # Read here with pypdf itself: the sandbox body turns logging off in the process it runs in.
    reader = PdfReader(io.BytesIO(WARM_UP_PDF), strict=True)
    assert [page.extract_text() for page in reader.pages] == ["warm up"]


class _AnsweringSandbox(ExtractionSandbox):
    """Answers every request with ``answer``, as a child broken into by its document could."""

    def __init__(self, answer: dict[str, object]) -> None:
        super().__init__()
        self._answer = answer

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
        return dict(self._answer)


def _docx_upload() -> AcceptedUpload:
    return AcceptedUpload(display_name="x.docx", format=DocumentFormat.DOCX, data=b"PK", sha256="0")


@pytest.mark.parametrize(
    "answer",
    [
        {"text": "ab", "boundaries": [5], "labels": ["", "x"]},  # a start past the text
        {"text": "abc", "boundaries": [2, 1], "labels": ["", "x", "y"]},  # out of order
        {"text": "abc", "boundaries": [1], "labels": [""]},  # a label short
        {"text": "abc", "boundaries": ["1"], "labels": ["", "x"]},
        {"refusal": "NOT_A_REASON", "breach": "not_a_breach"},
    ],
)
def test_a_docx_childs_answer_out_of_shape_is_malformed(answer: dict[str, object]) -> None:
    """The sandbox child's answer is checked before it becomes an extraction: anything but
    ordered unit starts within the text, one label each, fails the document classified."""
    with pytest.raises(DocumentRefusedError) as raised:
        extract(_docx_upload(), sandbox=_AnsweringSandbox(answer))
    assert (raised.value.refusal, raised.value.breach) == (DocumentRefusal.MALFORMED_DOCUMENT, None)


def test_a_docx_childs_answer_is_held_to_the_extraction_limits() -> None:
    """Limits are checked again on what comes back, whatever the child was told."""
    answer: dict[str, object] = {"text": "a\nb\nc", "boundaries": [2, 4], "labels": ["", "b", "c"]}
    sandbox = _AnsweringSandbox(answer)
    with pytest.raises(DocumentRefusedError) as raised:
        extract(_docx_upload(), sandbox=sandbox, limits=ExtractionLimits(max_segments=2))
    assert raised.value.refusal is DocumentRefusal.TOO_MANY_SEGMENTS
    with pytest.raises(DocumentRefusedError) as raised:
        extract(_docx_upload(), sandbox=sandbox, limits=ExtractionLimits(max_chars=4))
    assert raised.value.refusal is DocumentRefusal.TEXT_TOO_LONG
    assert extract(_docx_upload(), sandbox=sandbox).labels == ("", "b", "c")


def test_a_docx_childs_labels_are_capped_as_the_readers_own_are() -> None:
    """A label is a unit's title, at most ``LABEL_CHARS``; a child that sends longer ones
    (its reader broken into) has them cut, as every reader's own labels are."""
    long = "x" * (LABEL_CHARS * 50)
    answer: dict[str, object] = {"text": "a\nb", "boundaries": [2], "labels": [long, long]}
    labels = extract(_docx_upload(), sandbox=_AnsweringSandbox(answer)).labels
    assert labels == ("x" * LABEL_CHARS, "x" * LABEL_CHARS)


def test_the_former_pdf_limits_names_still_work_with_a_warning() -> None:
    """``PdfLimits`` and ``IngestionWorker(pdf_limits=...)`` predate DOCX in the sandbox."""
    from esra.core import docstore

    with pytest.warns(DeprecationWarning, match="SandboxLimits"):
        assert docstore.PdfLimits is SandboxLimits
    with pytest.warns(DeprecationWarning, match="sandbox_limits"):
        IngestionWorker(
            InMemoryDocumentRepository(),
            worker_id="w",
            clock=FakeClock(),
            pdf_limits=SandboxLimits(cpu_seconds=5),
        )
