"""A .docx that breaks a safety limit is stored as a Failed document, never a partial index.

Spec 004: a zip-bomb or XXE breach "yields a failed document with a MALFORMED_DOCUMENT
classification", and a failed document keeps its original bytes. The operator finds it on
the review screen with the limit named; re-indexing it by hand checks the package again
before python-docx ever opens it, so a stored bomb is never inflated by the worker.
"""

from __future__ import annotations

import io
import zipfile

import pytest

from esra.core._docstore.extraction import ExtractionLimits, extract
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.ingestion import IngestionWorker
from esra.core._docstore.management import DATA_MANAGE, DocumentStoreService, Operator
from esra.core._docstore.model import DocumentState
from esra.core._docstore.refusals import BREACH_REMEDIES, Breach, DocumentRefusedError
from esra.core._docstore.search import DocumentSearch
from esra.core._docstore.upload import AcceptedUpload, UploadLimits
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import AuditEvent, DocumentRefusal
from esra.core.testing import FakeClock, InMemoryAuditSink
from esra.core.testing._docstore import InMemoryDocumentRepository

TENANT = "tenant-a"
MANAGER = Operator(subject="manager@example.com", tenant_id=TENANT, roles=frozenset({DATA_MANAGE}))
W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
STORY = b"<w:document " + W + b"><w:body><w:p><w:r><w:t>Quarterly report</w:t></w:r></w:p>"
STORY += b"</w:body></w:document>"
XXE = b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><d>&x;</d>'


def _docx(*extra: tuple[str, bytes], document: bytes = STORY) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            b'<Default Extension="xml" ContentType="application/xml"/>'
            b'<Override PartName="/word/document.xml" ContentType="application/vnd.'
            b'openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        archive.writestr(
            "_rels/.rels",
            b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            b'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
            b'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
            b"</Relationships>",
        )
        archive.writestr("word/document.xml", document)
        for name, data in extra:
            archive.writestr(name, data)
    return buffer.getvalue()


# A real Word package carrying a part that compresses 2000:1 (a bomb's signature). python-docx
# would open it without complaint: only the zip guard stops it.
BOMB = _docx(("word/media/zeros.bin", b"\x00" * 2_000_000))


async def _service() -> tuple[DocumentStoreService, InMemoryDocumentRepository, InMemoryAuditSink]:
    repository, audit = InMemoryDocumentRepository(), InMemoryAuditSink()
    return DocumentStoreService(repository, audit=audit, clock=FakeClock()), repository, audit


def test_the_bomb_is_a_word_document_python_docx_would_open() -> None:
    """The control: without the zip guard, python-docx reads the bomb's text happily."""
    from docx import Document

    assert "Quarterly report" in [p.text for p in Document(io.BytesIO(BOMB)).paragraphs]


@pytest.mark.parametrize(
    ("data", "breach"),
    [
        (BOMB, Breach.ZIP_COMPRESSION_RATIO),
        (_docx(document=XXE), Breach.XML_DTD_OR_ENTITY),
        (_docx(*((f"word/media/{i}.xml", b"<a/>") for i in range(20))), Breach.ZIP_ENTRY_COUNT),
    ],
)
async def test_an_upload_that_breaks_a_limit_is_stored_failed_and_audited(
    data: bytes, breach: Breach
) -> None:
    """Stored Failed (bytes kept, no text), the outcome and audit record naming the breach."""
    service, repository, audit = await _service()
    limits = UploadLimits(zip=ZipLimits(max_entries=10))
    (outcome,) = await service.upload(MANAGER, [("report.docx", data)], scope="hr", limits=limits)
    assert outcome.stored_as_failed
    document = outcome.document
    assert document is not None
    assert (document.state, document.failure, document.failure_breach) == (
        DocumentState.FAILED,
        DocumentRefusal.MALFORMED_DOCUMENT,
        breach,
    )
    assert outcome.remedy == document.remedy == BREACH_REMEDIES[breach]
    assert (document.attempts, document.segment_count) == (0, 0)
    assert document.uploaded_by == MANAGER.subject
    assert await repository.original(TENANT, document.id) == data
    assert await repository.text(TENANT, document.id, scopes={"hr"}) is None
    (record,) = audit.events(AuditEvent.DOCUMENT_UPLOAD)
    assert record.outcome == "ok"
    assert record.dimensions == {
        "operator": MANAGER.subject,
        "document_id": document.id,
        "refusal": "MALFORMED_DOCUMENT",
        "breach": breach.value,
    }
    assert await IngestionWorker(repository, worker_id="w", clock=FakeClock()).run_turn() == []


async def test_a_reindexed_bomb_fails_again_without_being_opened() -> None:
    """The attack: extraction trusted the upload's check, so a stored bomb re-indexed by hand
    went straight to python-docx and was indexed. It must fail again, naming the breach."""
    service, repository, _ = await _service()
    (outcome,) = await service.upload(MANAGER, [("report.docx", BOMB)], scope="hr")
    assert outcome.document is not None
    document_id = outcome.document.id
    await service.reindex(MANAGER, document_id)
    (turn,) = await IngestionWorker(repository, worker_id="w", clock=FakeClock()).run_turn()
    assert (turn.failed, turn.indexed, turn.retried) == (1, 0, 0)
    failed = await repository.get(TENANT, document_id)
    assert failed is not None
    assert (failed.state, failed.failure_breach, failed.segment_count) == (
        DocumentState.FAILED,
        Breach.ZIP_COMPRESSION_RATIO,
        0,
    )
    assert failed.remedy == BREACH_REMEDIES[Breach.ZIP_COMPRESSION_RATIO]
    assert await repository.original(TENANT, document_id) == BOMB


def test_extraction_checks_the_package_before_python_docx() -> None:
    """``extract`` refuses a bomb with the breach whoever calls it, under its own limits."""
    upload = AcceptedUpload(display_name="r.docx", format=DocumentFormat.DOCX, data=BOMB, sha256="")
    with pytest.raises(DocumentRefusedError) as raised:
        extract(upload)
    assert raised.value.breach is Breach.ZIP_COMPRESSION_RATIO
    lenient = ExtractionLimits(zip=ZipLimits(min_ratio=0.0001))
    assert "Quarterly report" in extract(upload, limits=lenient).text


async def test_the_review_screen_finds_stored_failures_by_state_and_uploader() -> None:
    """Failed is one of the states the operator filters by; the uploader filter finds them."""
    service, _, _ = await _service()
    other = Operator(subject="other", tenant_id=TENANT, roles=frozenset({DATA_MANAGE}))
    await service.upload(MANAGER, [("report.docx", BOMB)], scope="hr")
    await service.upload(other, [("notes.txt", b"Plain notes.\n")], scope="hr")
    failed = await service.search(MANAGER, DocumentSearch(states=frozenset({DocumentState.FAILED})))
    assert [r.document.title for r in failed.rows] == ["report.docx"]
    mine = await service.search(MANAGER, DocumentSearch(uploader="other"))
    assert [r.document.title for r in mine.rows] == ["notes.txt"]
    assert failed.counts[DocumentState.FAILED] == 1
