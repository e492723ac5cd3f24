"""Hostile uploads: each test reproduces a hole the upload checks had."""

from __future__ import annotations

import io
import zipfile

import attrs
import pytest

from esra.core._docstore._docx_worker import extract_docx
from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core._docstore.upload import inspect_upload
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import DocumentRefusal

pytest.importorskip("docx")

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_MAIN_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
_RELS_TYPE = "application/vnd.openxmlformats-package.relationships+xml"


def _package(main_name: str, main_xml: str, *extra: tuple[str, bytes], types: str = "") -> bytes:
    """A Word package whose main document part is ``main_name``, declared by an override;
    ``word/document.xml`` is there too, empty, so the package looks ordinary by its names."""
    content_types = (
        '<?xml version="1.0"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        f'<Default Extension="rels" ContentType="{_RELS_TYPE}"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/{main_name}" ContentType="{_MAIN_TYPE}"/>{types}</Types>'
    )
    rels = (
        '<?xml version="1.0"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Target="' + main_name + '" Type="http://schemas.openxmlformats'
        '.org/officeDocument/2006/relationships/officeDocument"/></Relationships>'
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", content_types)
        archive.writestr("_rels/.rels", rels)
        if main_name != "word/document.xml":
            archive.writestr("word/document.xml", f"<w:document {W}/>")
        archive.writestr(main_name, main_xml)
        for name, data in extra:
            archive.writestr(name, data)
    return buffer.getvalue()


def _body(paragraphs: str, prefix: str = "w") -> str:
    namespace = W.replace("xmlns:w", f"xmlns:{prefix}")
    body = f"<{prefix}:body>{paragraphs}</{prefix}:body>"
    return f"<{prefix}:document {namespace}>{body}</{prefix}:document>"


def _refusal(name: str, data: bytes) -> DocumentRefusal:
    with pytest.raises(DocumentRefusedError) as raised:
        inspect_upload(name, data)
    return raised.value.refusal


def _extracted(data: bytes) -> dict[str, object]:
    return extract_docx(data, 1 << 20, {"segments": 1000, "zip": attrs.asdict(ZipLimits())})


_DTD_MAIN = (
    '<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY a "lol">'
    '<!ENTITY x SYSTEM "file:///etc/hostname">]>'
    + _body("<w:p><w:r><w:t>hello &a; &x;</w:t></w:r></w:p>")
)


def test_a_dtd_in_a_main_part_not_named_xml_is_a_breach() -> None:
    """python-docx parses the part its content type declares as the main document, whatever
    its name: a DTD there is a breach like one in word/document.xml (spec 004: every XML
    reader prohibits DTD processing; a breach is a failed MALFORMED_DOCUMENT)."""
    data = _package("word/main.dat", _DTD_MAIN)
    assert inspect_upload("x.docx", data).breach is Breach.XML_DTD_OR_ENTITY
    answer = _extracted(data)
    assert "text" not in answer
    assert answer["refusal"] == DocumentRefusal.MALFORMED_DOCUMENT.value
    assert answer["breach"] == Breach.XML_DTD_OR_ENTITY.value


def test_a_dtd_in_a_part_declared_xml_by_its_extension_is_a_breach() -> None:
    """A Default content type makes every member with that extension XML to python-docx."""
    data = _package(
        "word/main.part",
        _DTD_MAIN,
        types=f'<Default Extension="PART" ContentType="{_MAIN_TYPE}"/>',
    )
    assert inspect_upload("x.docx", data).breach is Breach.XML_DTD_OR_ENTITY


_DDE = '<w:fldSimple w:instr=" DDEAUTO c:\\\\windows\\\\system32\\\\cmd.exe &quot;/k calc&quot; "/>'


@pytest.mark.parametrize(
    "main",
    [
        # The main part under a name the DDE search did not look at.
        pytest.param(("word/main.dat", _body(f"<w:p>{_DDE}</w:p>")), id="part-not-named-xml"),
        # Another namespace prefix for the same WordprocessingML namespace.
        pytest.param(
            (
                "word/document.xml",
                _body(
                    "<x:p><x:r><x:fldChar x:fldCharType='begin'/></x:r><x:r><x:instrText>"
                    ' DDEAUTO cmd "/k calc"</x:instrText></x:r></x:p>',
                    prefix="x",
                ),
            ),
            id="other-prefix",
        ),
        # A character reference for the keyword's first letter.
        pytest.param(
            (
                "word/document.xml",
                _body("<w:p><w:r><w:instrText>&#68;DEAUTO cmd</w:instrText></w:r></w:p>"),
            ),
            id="character-reference",
        ),
        # The keyword in a CDATA section.
        pytest.param(
            (
                "word/document.xml",
                _body("<w:p><w:r><w:instrText><![CDATA[ DDE cmd]]></w:instrText></w:r></w:p>"),
            ),
            id="cdata",
        ),
        # The keyword split across two runs of one field (Word joins them).
        pytest.param(
            (
                "word/document.xml",
                _body(
                    "<w:p><w:r><w:fldChar w:fldCharType='begin'/></w:r>"
                    "<w:r><w:instrText> DD</w:instrText></w:r>"
                    '<w:r><w:instrText>EAUTO cmd "/k calc"</w:instrText></w:r>'
                    "<w:r><w:fldChar w:fldCharType='end'/></w:r></w:p>"
                ),
            ),
            id="split-across-runs",
        ),
    ],
)
def test_a_dde_field_is_refused_however_it_is_written(main: tuple[str, str]) -> None:
    """A DDE field is active content whichever part, prefix or encoding carries it."""
    assert _refusal("dde.docx", _package(*main)) is DocumentRefusal.ACTIVE_CONTENT


def test_ordinary_fields_and_an_svg_image_with_a_doctype_are_still_accepted() -> None:
    """Only XML python-docx parses is held to the DTD rule (an image is a blob to it), and
    only a DDE instruction is active content."""
    svg = (
        b'<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
        b'"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd"><svg/>'
    )
    main = _body(
        "<w:p><w:r><w:fldChar w:fldCharType='begin'/></w:r>"
        "<w:r><w:instrText> PAGE </w:instrText></w:r>"
        "<w:r><w:fldChar w:fldCharType='end'/></w:r>"
        "<w:r><w:t>DDE attacks are explained here</w:t></w:r></w:p>"
    )
    data = _package(
        "word/document.xml",
        main,
        ("word/media/image1.svg", svg),
        types='<Default Extension="svg" ContentType="image/svg+xml"/>',
    )
    accepted = inspect_upload("ok.docx", data)
    assert accepted.breach is None
    assert "DDE attacks are explained here" in str(_extracted(data)["text"])


@pytest.mark.parametrize(
    "cell",
    [
        # A separator inside the quoted cell used to end the match before the ``!``.
        b"\"=cmd|' /C calc,x'!A0\"",
        b"\"=cmd|' /C calc;x'!A0\"",
        b"\"=cmd|' /C calc\tx'!A0\"",
        b"\"@SUM(1,1)*cmd|' /C calc'!A0\"",
        # An escaped quote inside the quoted cell.
        b'"=cmd|\' /C ""calc""\'!A0"',
        # A line break inside the quoted cell (Excel keeps it in the cell).
        b"\"=cmd|' /C\ncalc'!A0\"",
    ],
)
def test_a_dde_formula_in_a_quoted_csv_cell_is_refused(cell: bytes) -> None:
    """Quoting a cell does not hide its DDE formula: Excel evaluates the unquoted value."""
    data = b"name,value\nalice," + cell + b"\n"
    assert _refusal("sheet.csv", data) is DocumentRefusal.ACTIVE_CONTENT


@pytest.mark.parametrize(
    "row",
    [
        b'"a quoted, ordinary cell with a | pipe and a ! bang",2',
        b'"=SUM(A1,A2)",3',
        b'"-5","+7"',
        b'"pipes | and, commas",  "!"',
    ],
)
def test_quoted_csv_cells_without_dde_are_still_accepted(row: bytes) -> None:
    """Only a formula reaching a ``|`` and then a ``!`` within its cell is refused."""
    assert inspect_upload("sheet.csv", b"a,b\n" + row + b"\n").breach is None


def test_a_part_cannot_redeclare_the_content_types_that_decide_what_is_checked() -> None:
    """Only ``[Content_Types].xml`` declares types: a part written before the main document
    with content-types elements of its own does not take the main part out of the checks."""
    ct = "http://schemas.openxmlformats.org/package/2006/content-types"
    decoy = f'<Types xmlns="{ct}"><Override PartName="/word/main.dat" ContentType="a/b"/></Types>'
    buffer = io.BytesIO()
    original = io.BytesIO(_package("word/main.dat", _DTD_MAIN))
    with (
        zipfile.ZipFile(original) as source,
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
    ):
        for info in source.infolist():
            if info.filename == "word/main.dat":
                archive.writestr("word/decoy.xml", decoy)
            archive.writestr(info.filename, source.read(info))
    assert inspect_upload("x.docx", buffer.getvalue()).breach is Breach.XML_DTD_OR_ENTITY
