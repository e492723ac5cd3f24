"""Every refusal's remedy points the operator the right way: a Latin-1 file is told to save as
UTF-8, and each .docx safety limit (entry count, zip bomb, XXE, structure) names itself — in
the Failed document it is stored as, and in the upload's per-file outcome."""

from __future__ import annotations

import io
import random
import zipfile

import pytest

from esra.core._docstore.ingestion import upload_files
from esra.core._docstore.model import DocumentState
from esra.core._docstore.refusals import BREACH_REMEDIES, REMEDIES, Breach, DocumentRefusedError
from esra.core._docstore.upload import UploadLimits, inspect_upload
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import DocumentRefusal
from esra.core.testing import FakeClock
from esra.core.testing._docstore import InMemoryDocumentRepository

W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
XXE = b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><d>&x;</d>'
LATIN_1 = "Caf\xe9 cr\xe8me br\xfbl\xe9e, na\xefve fa\xe7ade.\n".encode("latin-1")


def _zip(*entries: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


def _docx(*extra: tuple[str, bytes], document: bytes = b"<w:document " + W + b"/>") -> bytes:
    return _zip(("[Content_Types].xml", b"<Types/>"), ("word/document.xml", document), *extra)


def _refused(name: str, data: bytes, limits: UploadLimits | None = None) -> DocumentRefusedError:
    with pytest.raises(DocumentRefusedError) as raised:
        inspect_upload(name, data, limits)
    return raised.value


@pytest.mark.parametrize("name", ["menu.txt", "menu.md", "menu.csv"])
def test_a_latin1_text_file_is_told_to_save_as_utf8(name: str) -> None:
    """The attack: a Latin-1 text file was told "upload it with its real extension"."""
    refused = _refused(name, LATIN_1 * 20)
    assert refused.refusal is DocumentRefusal.TYPE_MISMATCH
    assert "Save it as UTF-8" in refused.remedy
    assert "real extension" not in refused.remedy


def test_latin1_past_the_sniffed_header_gets_the_same_remedy() -> None:
    """UTF-8-clean for the first 8 KiB, Latin-1 after: the full decode says the same."""
    refused = _refused("long.txt", b"plain ascii line\n" * 1000 + LATIN_1)
    assert refused.refusal is DocumentRefusal.TYPE_MISMATCH
    assert "Save it as UTF-8" in refused.remedy


def test_binary_named_txt_still_gets_the_extension_remedy() -> None:
    """Real binary content is still a type mismatch with the extension remedy."""
    refused = _refused("tool.txt", bytes(range(256)) * 40)
    assert refused.remedy == REMEDIES[DocumentRefusal.TYPE_MISMATCH]


LIMITS = UploadLimits(zip=ZipLimits(max_entries=10, max_entry_bytes=400_000))
BREACHES = {
    "entry count": (_docx(*((f"word/media/f{i}.xml", b"<a/>") for i in range(12))), "entry-count"),
    "compression ratio": (
        _docx(("word/media/zeros.bin", b"\x00" * 2_000_000)),
        "compression ratio",
    ),
    "inflated size": (
        _docx(("word/media/big.bin", random.Random(7).randbytes(512_000))),
        "uncompressed-size",
    ),
    "xxe": (_docx(document=XXE), "DTD"),
    "structure": (_docx(("../evil.xml", b"<a/>")), "zip structure"),
    "invalid xml": (_docx(document=b"<w:document " + W + b">"), "XML is damaged"),
}


@pytest.mark.parametrize("case", sorted(BREACHES))
async def test_each_docx_safety_limit_names_itself_in_the_remedy(case: str) -> None:
    """The attack: bombs, XXE and the entry-count limit shared one generic remedy. Each
    breach is stored as a Failed MALFORMED_DOCUMENT (the spec's classification) naming the
    breach, with its own remedy."""
    data, phrase = BREACHES[case]
    breach = inspect_upload("report.docx", data, LIMITS).breach
    assert breach is not None
    (outcome,) = await upload_files(
        InMemoryDocumentRepository(),
        "tenant-a",
        [("report.docx", data)],
        scope="all",
        clock=FakeClock(),
        limits=LIMITS,
    )
    assert outcome.stored_as_failed
    assert outcome.document is not None
    assert outcome.document.state is DocumentState.FAILED
    assert outcome.document.failure_breach is breach
    assert outcome.refusal is DocumentRefusal.MALFORMED_DOCUMENT
    assert outcome.remedy == outcome.document.remedy == BREACH_REMEDIES[breach]
    assert phrase in outcome.remedy
    assert outcome.remedy != REMEDIES[DocumentRefusal.MALFORMED_DOCUMENT]


def test_a_latin1_file_is_refused_not_stored() -> None:
    """Not UTF-8 is a breach with its own remedy, but nothing about it is unsafe to review:
    it stays a refusal ("save it as UTF-8"), never a stored failure."""
    refused = _refused("menu.txt", LATIN_1)
    assert refused.breach is Breach.TEXT_NOT_UTF8


def test_breach_remedies_are_distinct() -> None:
    """No two breaches (nor a breach and a reason) share a remedy."""
    texts = [*BREACH_REMEDIES.values(), *REMEDIES.values()]
    assert len(set(texts)) == len(texts)


async def test_the_per_file_upload_outcome_carries_the_specific_remedy() -> None:
    """What the API and the portal show per file is the breach's remedy, not the generic one."""
    outcomes = await upload_files(
        InMemoryDocumentRepository(),
        "tenant-a",
        [("bomb.docx", BREACHES["compression ratio"][0]), ("menu.txt", LATIN_1)],
        scope="all",
        clock=FakeClock(),
        limits=LIMITS,
    )
    assert [o.refusal for o in outcomes] == [
        DocumentRefusal.MALFORMED_DOCUMENT,
        DocumentRefusal.TYPE_MISMATCH,
    ]
    assert [o.stored_as_failed for o in outcomes] == [True, False]
    assert outcomes[0].remedy is not None
    assert "compression ratio" in outcomes[0].remedy
    assert outcomes[1].remedy is not None
    assert "UTF-8" in outcomes[1].remedy
