"""Upload inspection with real and hostile files: one classified outcome each, nothing inflated
or resolved past a limit. A .docx that breaks a safety limit is accepted *as a breach* (stored
Failed by the repository); every other hostile file is refused."""

from __future__ import annotations

import io
import random
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esra.core._docstore.filenames import sanitize_filename
from esra.core._docstore.formats import DocumentFormat
from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core._docstore.upload import UploadLimits, inspect_upload
from esra.core._docstore.zipguard import ZipLimits, inflate_members
from esra.core.codes import DocumentRefusal
from tests._external import shared_data

DOCUMENTS = "documents"


def _refusal(name: str, data: bytes, limits: UploadLimits | None = None) -> DocumentRefusal:
    with pytest.raises(DocumentRefusedError) as raised:
        inspect_upload(name, data, limits)
    return raised.value.refusal


def _breach(name: str, data: bytes, limits: UploadLimits | None = None) -> Breach:
    accepted = inspect_upload(name, data, limits)
    assert accepted.breach is not None, "accepted without a breach"
    return accepted.breach


def _zip(entries: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in entries:
            archive.writestr(name, data)
    return buffer.getvalue()


W = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _docx(document_xml: bytes = b"<w:document " + W + b"/>", **extra: bytes) -> bytes:
    return _zip(
        [
            ("[Content_Types].xml", b"<Types/>"),
            ("word/document.xml", document_xml),
            *extra.items(),
        ]
    )


def _outcome(path: Path) -> str:
    try:
        accepted = inspect_upload(path.name, path.read_bytes())
    except DocumentRefusedError as refused:
        return refused.refusal.value if refused.remedy else "refused without a remedy"
    if accepted.breach is not None:
        return "breach"
    return "accepted" if accepted.format in DocumentFormat else "unknown format"


@pytest.mark.external_data
def test_every_real_file_gets_exactly_one_classified_outcome() -> None:
    """No crash, no unclassified error: accepted with a format (or as a breach, to be stored
    Failed), or refused with a reason."""
    root = shared_data(DOCUMENTS)
    outcomes = Counter(_outcome(path) for path in sorted(p for p in root.rglob("*") if p.is_file()))
    assert sum(outcomes.values()) > 500
    assert outcomes["accepted"] > 400
    assert set(outcomes) <= {"accepted", "breach", *(r.value for r in DocumentRefusal)}


@pytest.mark.external_data
@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("malicious/office_dde_macro_ole/msodde_dde-test.docx", DocumentRefusal.ACTIVE_CONTENT),
        ("malicious/office_dde_macro_ole/msodde_dde-in-csv.csv", DocumentRefusal.ACTIVE_CONTENT),
        ("malicious/office_dde_macro_ole/msodde_dde-test.docm", DocumentRefusal.MACRO_ENABLED),
        ("office_apache_poi/document_SimpleMacro.docm", DocumentRefusal.MACRO_ENABLED),
        (
            "malicious/office_dde_macro_ole/oleobj_sample_with_calc_embedded.doc",
            DocumentRefusal.LEGACY_DOC,
        ),
        (
            "office_apache_poi/document_bug53475-password-is-pass.docx",
            DocumentRefusal.PASSWORD_PROTECTED,
        ),
        ("office_apache_poi/poifs_protected_agile.docx", DocumentRefusal.PASSWORD_PROTECTED),
        # Damaged, not hostile: nothing to review, "re-export it" at once.
        ("office_apache_poi/document_truncated62886.docx", DocumentRefusal.MALFORMED_DOCUMENT),
    ],
)
def test_hostile_files_are_refused_with_their_reason(
    relative: str, expected: DocumentRefusal
) -> None:
    """Macros, DDE, encryption and truncation each get their code (embedded objects are
    ignored, not refused: test_embedded_and_external; XXE is a stored breach, below)."""
    path = shared_data(f"{DOCUMENTS}/{relative}")
    assert _refusal(path.name, path.read_bytes()) is expected


@pytest.mark.external_data
@pytest.mark.parametrize(
    "relative",
    [
        "malicious/xxe_ooxml/openxml4j_ContentTypeHasEntities.ooxml",
        "malicious/xxe_ooxml/openxml4j_CorePropertiesHasEntities.ooxml",
        "malicious/xxe_ooxml/openxml4j_PackageRelsHasEntities.ooxml",
        "malicious/xxe_ooxml/spreadsheet_54764.xlsx",
        "malicious/xxe_ooxml/spreadsheet_54764-2.xlsx",
    ],
)
def test_entities_in_any_ooxml_part_are_breaches_even_renamed(relative: str) -> None:
    """Every XML part is parsed with DTDs and entities forbidden, whatever the package is."""
    data = shared_data(f"{DOCUMENTS}/{relative}").read_bytes()
    assert _breach("renamed.docx", data) is Breach.XML_DTD_OR_ENTITY


@pytest.mark.external_data
@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("malicious/xxe_ooxml/document_ExternalEntityInText.docx", Breach.XML_DTD_OR_ENTITY),
    ],
)
def test_real_breaches_are_accepted_as_breaches(relative: str, expected: Breach) -> None:
    """An XXE document is kept for review as Failed, naming the limit it broke."""
    path = shared_data(f"{DOCUMENTS}/{relative}")
    assert _breach(path.name, path.read_bytes()) is expected


@pytest.mark.external_data
def test_the_zip_bomb_is_refused_before_inflation() -> None:
    """The overlapping-entry bomb is caught from the central directory, nothing inflated."""
    data = shared_data(f"{DOCUMENTS}/malicious/zip_bombs/fifield_zbsm_via_corda.zip").read_bytes()
    with pytest.raises(DocumentRefusedError) as raised:
        inflate_members(data)
    assert raised.value.refusal is DocumentRefusal.MALFORMED_DOCUMENT
    assert raised.value.detail in {"overlapping entries", "declared size over the total limit"}
    assert _breach("bomb.docx", data) in {Breach.ZIP_STRUCTURE, Breach.ZIP_INFLATED_SIZE}


@pytest.mark.external_data
def test_a_symlink_entry_is_refused() -> None:
    """A zip entry that is a symbolic link never becomes a member."""
    path = f"{DOCUMENTS}/malicious/zip_symlink/PATT_etc_passwd_symlink.zip"
    with pytest.raises(DocumentRefusedError) as raised:
        inflate_members(shared_data(path).read_bytes())
    assert raised.value.detail == "symbolic link entry"


def test_legacy_doc_is_refused_with_the_conversion_remedy() -> None:
    """.doc gets the actionable message the spec asks for."""
    with pytest.raises(DocumentRefusedError) as raised:
        inspect_upload("report.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100)
    assert "convert to .docx and retry" in raised.value.remedy


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("notes.txt", b"%PDF-1.7\n%binary"),
        ("paper.pdf", b"just some text"),
        ("table.csv", b"PK\x03\x04rest"),
        ("memo.docx", b"plain text pretending"),
        ("memo.md", b"\x00\x01\x02binary"),
        ("latin.txt", "caf\xe9 au lait".encode("latin-1")),
    ],
)
def test_content_that_disagrees_with_its_extension_is_refused(name: str, data: bytes) -> None:
    """Type comes from magic bytes; a mismatch is a rejection, not a coercion."""
    assert _refusal(name, data) is DocumentRefusal.TYPE_MISMATCH


@pytest.mark.parametrize("name", ["a.exe", "b.xlsx", "c", "d.odt", "e.rtf", "f.zip"])
def test_unsupported_extensions_are_refused(name: str) -> None:
    """Only .txt .md .csv .pdf .docx are accepted."""
    assert _refusal(name, b"hello") is DocumentRefusal.UNSUPPORTED_TYPE


def test_empty_and_oversized_files_are_refused() -> None:
    """Size limits apply before anything else is read."""
    assert _refusal("a.txt", b"") is DocumentRefusal.EMPTY_DOCUMENT
    assert _refusal("a.txt", b"x" * 11, UploadLimits(max_bytes=10)) is DocumentRefusal.TOO_LARGE


@pytest.mark.parametrize(
    ("entries", "detail"),
    [
        ([(f"f{i}.xml", b"<a/>") for i in range(12)], "too many entries"),
        ([("a.xml", b"<a/>"), ("A.xml", b"<a/>")], "duplicate entry name"),
        ([("../evil.xml", b"<a/>")], "parent-directory entry name"),
        ([("/etc/passwd", b"x")], "absolute entry name"),
        ([("C:/x.xml", b"<a/>")], "absolute entry name"),
        ([("zeros.bin", b"\x00" * 2_000_000)], "compression ratio below the limit"),
        ([("big.bin", random.Random(7).randbytes(512_000))], "inflated size over the limit"),
    ],
)
def test_zip_limits_are_enforced(entries: list[tuple[str, bytes]], detail: str) -> None:
    """Entry count, names, ratio and inflated size each stop inflation with MALFORMED."""
    limits = ZipLimits(max_entries=10, max_entry_bytes=400_000, max_total_bytes=10_000_000)
    with pytest.raises(DocumentRefusedError) as raised:
        inflate_members(_zip(entries), limits)
    assert raised.value.refusal is DocumentRefusal.MALFORMED_DOCUMENT
    assert raised.value.detail == detail


def _docx_with_compressed_member(compress_type: int, inflated_mib: int) -> bytes:
    """A Word package whose ``word/media/zeros.bin`` holds ``inflated_mib`` MiB of zeros."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", b"<Types/>")
        archive.writestr("word/document.xml", b"<w:document " + W + b"/>")
        member = zipfile.ZipInfo("word/media/zeros.bin")
        member.compress_type = compress_type
        # Streamed, so the test never holds the inflated bytes either.
        with archive.open(member, "w") as target:
            for _ in range(inflated_mib):
                target.write(bytes(1 << 20))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("compress_type", "inflated_mib"),
    [(zipfile.ZIP_BZIP2, 64), (zipfile.ZIP_LZMA, 8)],
    ids=["bzip2", "lzma"],
)
def test_an_entry_not_stored_or_deflated_is_refused_before_any_member_is_read(
    monkeypatch: pytest.MonkeyPatch, compress_type: int, inflated_mib: int
) -> None:
    """bzip2 and LZMA inflate a whole compressed chunk with no output bound, so counting the
    output cannot stop a bomb; such an entry is a structure breach, caught from the central
    directory (a few hundred bytes of bzip2 here would become 64 MiB)."""
    data = _docx_with_compressed_member(compress_type, inflated_mib)
    assert len(data) < 16 * 1024

    def no_member_read(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a member was read before the archive was refused")

    monkeypatch.setattr(zipfile.ZipFile, "open", no_member_read)
    with pytest.raises(DocumentRefusedError) as raised:
        inflate_members(data)
    assert raised.value.refusal is DocumentRefusal.MALFORMED_DOCUMENT
    assert raised.value.breach is Breach.ZIP_STRUCTURE
    assert raised.value.detail == "unsupported compression method"
    assert _breach("bomb.docx", data) is Breach.ZIP_STRUCTURE


def test_a_minimal_word_package_is_accepted_and_hashed() -> None:
    """A plain package passes; its hash identifies duplicates later."""
    accepted = inspect_upload("../../etc/Report .docx", _docx())
    assert accepted.format is DocumentFormat.DOCX
    assert accepted.display_name == "Report .docx"
    assert len(accepted.sha256) == 64


def test_a_dtd_in_the_main_part_is_a_breach() -> None:
    """XXE in the story part is a breach (stored Failed), never resolved."""
    xxe = b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><d>&x;</d>'
    assert _breach("x.docx", _docx(xxe)) is Breach.XML_DTD_OR_ENTITY


def test_a_dde_field_is_refused_but_text_about_dde_is_not() -> None:
    """Only a field instruction starting with DDE counts; prose mentioning DDE is fine."""
    field = b"<w:document " + W + b'><w:fldSimple w:instr=" DDEAUTO cmd /c calc "/></w:document>'
    assert _refusal("dde.docx", _docx(field)) is DocumentRefusal.ACTIVE_CONTENT
    prose = b"<w:document " + W + b"><w:t>DDE attacks are explained here</w:t></w:document>"
    assert inspect_upload("about.docx", _docx(prose)).format is DocumentFormat.DOCX


def test_a_vba_project_is_refused_even_in_a_docx() -> None:
    """Macro content is refused by what the package holds, not by its extension."""
    data = _docx(**{"word/vbaProject.bin": b"\x00macro"})
    assert _refusal("sneaky.docx", data) is DocumentRefusal.MACRO_ENABLED


@given(st.text(max_size=400))
def test_sanitized_filenames_are_safe_display_labels(name: str) -> None:
    """No separators, control characters or leading dots; bounded; never empty."""
    label = sanitize_filename(name)
    assert label
    assert len(label) <= 200
    assert "/" not in label
    assert "\\" not in label
    assert not label.startswith(".")
    assert all(ord(ch) >= 32 and not 0x7F <= ord(ch) <= 0x9F for ch in label)


def test_sanitize_keeps_the_extension_when_truncating() -> None:
    """Long names keep their extension so the type stays visible."""
    label = sanitize_filename("x" * 500 + ".pdf")
    assert label.endswith(".pdf")
    assert len(label) == 200


def test_an_unreadable_path_is_not_needed() -> None:
    """Inspection works on bytes alone: no path is ever derived from the name."""
    assert inspect_upload("dir/../../x.txt", b"hello world").display_name == "x.txt"
    assert Path("x.txt").name == "x.txt"
