"""Embedded objects are ignored and external targets never fetched; macros, ActiveX and DDE
are still refused (spec 004, upload security: "Embedded objects, external relationships and
remote images are ignored, not fetched").

The packages are built here, part by part, so each carries exactly the construct under test
next to ordinary body text that must come out of extraction.
"""

from __future__ import annotations

import http.client
import http.server
import io
import socket
import threading
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import docx.opc.part
import docx.opc.pkgreader
import pytest

from esra.core._docstore import ooxml
from esra.core._docstore._docx_worker import check_package, extract_docx
from esra.core._docstore.extraction import extract, segment_extraction
from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core._docstore.scanner import scan_text
from esra.core._docstore.upload import inspect_upload
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import DocumentRefusal
from tests._external import shared_data

_NS = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture" '
    'xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart" '
    'xmlns:v="urn:schemas-microsoft-com:vml" '
    'xmlns:o="urn:schemas-microsoft-com:office:office"'
)
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_CT_MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
_CT_SETTINGS = "application/vnd.openxmlformats-officedocument.wordprocessingml.settings+xml"
_CT_OLE = "application/vnd.openxmlformats-officedocument.oleObject"
_CT_CHART = "application/vnd.openxmlformats-officedocument.drawingml.chart+xml"
_CT_XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
_CT_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
_CT_XLSM = "application/vnd.ms-excel.sheet.macroEnabled.12"
_CT_ACTIVEX_XML = "application/vnd.ms-office.activeX+xml"
_CT_ACTIVEX_BIN = "application/vnd.ms-office.activeX"
_MS_REL = "http://schemas.microsoft.com/office/2006/relationships"
TEXT = ("Quarterly results", "Revenue grew in every region.")


@attrs.frozen
class Rel:
    """One relationship of a part; ``external`` for a URL target."""

    id: str
    type: str
    target: str
    external: bool = False

    def xml(self) -> str:
        mode = ' TargetMode="External"' if self.external else ""
        return f'<Relationship Id="{self.id}" Type="{self.type}" Target="{self.target}"{mode}/>'


def _rels(rels: list[Rel]) -> bytes:
    body = "".join(rel.xml() for rel in rels)
    ns = "http://schemas.openxmlformats.org/package/2006/relationships"
    return f'<?xml version="1.0"?><Relationships xmlns="{ns}">{body}</Relationships>'.encode()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _word_package(
    body: str = "",
    *,
    rels: list[Rel] | None = None,
    parts: dict[str, tuple[str, bytes]] | None = None,
    members: dict[str, bytes] | None = None,
) -> bytes:
    """A Word package: ``TEXT`` as two paragraphs around ``body``, the document's ``rels``,
    extra ``parts`` (name: content type and bytes, declared in [Content_Types].xml) and raw
    ``members`` (``_rels`` files of other parts)."""
    parts = parts or {}
    overrides = "".join(
        f'<Override PartName="/{name}" ContentType="{content_type}"/>'
        for name, (content_type, _) in {"word/document.xml": (_CT_MAIN, b""), **parts}.items()
    )
    content_types = (
        '<?xml version="1.0"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        f'<Default Extension="xml" ContentType="application/xml"/>{overrides}</Types>'
    )
    first, second = TEXT
    document = (
        f'<?xml version="1.0"?><w:document {_NS}><w:body>'
        f"<w:p><w:r><w:t>{first}</w:t></w:r></w:p>{body}"
        f"<w:p><w:r><w:t>{second}</w:t></w:r></w:p></w:body></w:document>"
    )
    package_rels = [Rel("rId1", f"{_REL}/officeDocument", "word/document.xml")]
    return _zip(
        {
            "[Content_Types].xml": content_types.encode(),
            "_rels/.rels": _rels(package_rels),
            "word/document.xml": document.encode(),
            "word/_rels/document.xml.rels": _rels(rels or []),
            **{name: data for name, (_, data) in parts.items()},
            **(members or {}),
        }
    )


def _refusal(name: str, data: bytes) -> DocumentRefusal:
    with pytest.raises(DocumentRefusedError) as raised:
        inspect_upload(name, data)
    return raised.value.refusal


def _extracted_text(name: str, data: bytes) -> str:
    upload = inspect_upload(name, data)
    extraction = extract(upload)
    assert segment_extraction(extraction)
    return extraction.text


# --- Embedded objects: each payload below would be refused, or break a reader, if opened. ---

# An OLE compound-file header over garbage: no valid sector table for any OLE reader.
BROKEN_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\xff" * 600
# A zip package, standing in for the workbook behind a chart, whose XML declares an
# external entity.
XXE_WORKBOOK = _zip(
    {
        "[Content_Types].xml": b"<Types/>",
        "word/document.xml": (
            b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
        ),
    }
)
# A Word document with a DDE field, embedded as a package.
DDE_DOCUMENT = _zip(
    {
        "[Content_Types].xml": b"<Types/>",
        "word/document.xml": (
            b"<w:document " + _NS.encode() + b'><w:fldSimple w:instr=" DDEAUTO cmd /c calc "/>'
            b"</w:document>"
        ),
    }
)
EMBEDDED_PAYLOADS = (BROKEN_OLE, XXE_WORKBOOK, DDE_DOCUMENT)

_OLE_BODY = (
    '<w:p><w:r><w:object><v:shape id="ole1" type="#_x0000_t75"/>'
    '<o:OLEObject Type="Embed" ProgID="Package" ShapeID="ole1" r:id="rIdOle"/>'
    "</w:object></w:r></w:p>"
)
_CHART_BODY = (
    "<w:p><w:r><w:drawing><wp:inline><wp:extent cx='1' cy='1'/><wp:docPr id='1' name='c'/>"
    '<a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/chart">'
    '<c:chart r:id="rIdChart"/></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>'
)
_CHART = (
    f'<?xml version="1.0"?><c:chartSpace {_NS}><c:chart><c:plotArea/></c:chart>'
    '<c:externalData r:id="rIdData"/></c:chartSpace>'
).encode()


def _with_embedded_objects() -> bytes:
    """An OLE object, a chart with its embedded workbook, and an embedded Word package."""
    return _word_package(
        _OLE_BODY + _CHART_BODY,
        rels=[
            Rel("rIdOle", f"{_REL}/oleObject", "embeddings/oleObject1.bin"),
            Rel("rIdChart", f"{_REL}/chart", "charts/chart1.xml"),
            Rel("rIdDoc", f"{_REL}/package", "embeddings/Microsoft_Word_Document1.docx"),
        ],
        parts={
            "word/embeddings/oleObject1.bin": (_CT_OLE, BROKEN_OLE),
            "word/charts/chart1.xml": (_CT_CHART, _CHART),
            "word/embeddings/Microsoft_Excel_Sheet1.xlsx": (_CT_XLSX, XXE_WORKBOOK),
            "word/embeddings/Microsoft_Word_Document1.docx": (_CT_DOCX, DDE_DOCUMENT),
        },
        members={
            "word/charts/_rels/chart1.xml.rels": _rels(
                [Rel("rIdData", f"{_REL}/package", "../embeddings/Microsoft_Excel_Sheet1.xlsx")]
            )
        },
    )


def test_the_embedded_payloads_would_be_refused_if_they_were_inspected() -> None:
    """The control for the tests below: each payload is hostile on its own."""
    assert inspect_upload("workbook.docx", XXE_WORKBOOK).breach is Breach.XML_DTD_OR_ENTITY
    assert _refusal("embedded.docx", DDE_DOCUMENT) is DocumentRefusal.ACTIVE_CONTENT
    assert _refusal("object.docx", BROKEN_OLE) is DocumentRefusal.TYPE_MISMATCH


def test_a_document_with_embedded_objects_and_a_chart_is_accepted_and_extracted() -> None:
    """OLE object, chart, chart workbook and embedded package: ignored, the text indexed."""
    text = _extracted_text("report.docx", _with_embedded_objects())
    assert text.split("\n") == [TEXT[0], "", "", TEXT[1]]


def _record_calls(
    monkeypatch: pytest.MonkeyPatch, owner: object, name: str, seen: list[bytes]
) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def recording(data: bytes | str, *args: Any, **kwargs: Any) -> Any:
        seen.append(data if isinstance(data, bytes) else data.encode())
        return original(data, *args, **kwargs)

    monkeypatch.setattr(owner, name, recording)


def test_no_embedded_object_is_ever_parsed_or_unzipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every XML parse (ours and python-docx's) and every zip opened during upload and
    extraction is recorded: none of them is handed an embedded object's bytes. Both run in
    sandbox children, out of the spies' reach, so their bodies run here, on the same bytes."""
    parsed: list[bytes] = []
    parsers = (
        (ooxml, "_stream_parse"),
        (docx.opc.part, "parse_xml"),
        (docx.opc.pkgreader, "parse_xml"),
    )
    for owner, name in parsers:
        _record_calls(monkeypatch, owner, name, parsed)
    unzipped: list[bytes] = []
    original_init = zipfile.ZipFile.__init__

    def recording_init(self: zipfile.ZipFile, file: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(file, io.BytesIO):
            unzipped.append(file.getvalue())
        original_init(self, file, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "__init__", recording_init)
    package = _with_embedded_objects()
    zip_options = {"zip": attrs.asdict(ZipLimits())}
    assert check_package(package, 0, zip_options) == {"checked": True}
    assert "text" in extract_docx(package, 1 << 20, {"segments": 1000, **zip_options})
    assert package in unzipped  # the spies see the package itself...
    assert _CHART in parsed  # ...and the chart, an ordinary XML part of it
    for payload in EMBEDDED_PAYLOADS:  # ...but never an embedded object
        assert payload not in unzipped
        assert payload not in parsed


def test_embedded_objects_do_not_mask_active_content() -> None:
    """Ignoring embedded objects leaves the other rules as they were."""
    activex = _word_package(
        _OLE_BODY,
        rels=[
            Rel("rIdOle", f"{_REL}/oleObject", "embeddings/oleObject1.bin"),
            Rel("rIdCtl", f"{_REL}/control", "activeX/activeX1.xml"),
        ],
        parts={
            "word/embeddings/oleObject1.bin": (_CT_OLE, BROKEN_OLE),
            "word/activeX/activeX1.xml": (_CT_ACTIVEX_XML, b"<ax:ocx xmlns:ax='urn:ax'/>"),
        },
    )
    assert _refusal("control.docx", activex) is DocumentRefusal.ACTIVE_CONTENT
    dde = _word_package(
        _CHART_BODY + '<w:p><w:fldSimple w:instr=" DDE excel sheet1 r1c1 "/></w:p>',
        rels=[Rel("rIdChart", f"{_REL}/chart", "charts/chart1.xml")],
        parts={"word/charts/chart1.xml": (_CT_CHART, _CHART)},
    )
    assert _refusal("dde.docx", dde) is DocumentRefusal.ACTIVE_CONTENT
    macro = _word_package(
        _OLE_BODY,
        rels=[Rel("rIdOle", f"{_REL}/oleObject", "embeddings/oleObject1.bin")],
        parts={
            "word/embeddings/oleObject1.bin": (_CT_OLE, BROKEN_OLE),
            "word/vbaProject.bin": ("application/vnd.ms-office.vbaProject", b"\x00vba"),
        },
    )
    assert _refusal("macro.docx", macro) is DocumentRefusal.MACRO_ENABLED


@pytest.mark.parametrize(
    ("parts", "members"),
    [
        ({"word/activeX/activeX1.xml": (_CT_ACTIVEX_XML, b"<ocx/>")}, {}),
        # Declared by content type only, under a folder of its own choosing.
        ({"word/controls/c1.bin": (_CT_ACTIVEX_BIN, b"\x00")}, {}),
        # Declared by relationship only.
        (
            {"word/controls/c1.xml": ("application/xml", b"<ocx/>")},
            {
                "word/controls/_rels/c1.xml.rels": _rels(
                    [Rel("rId1", f"{_MS_REL}/activeXControlBinary", "c1.bin")]
                )
            },
        ),
    ],
)
def test_activex_controls_are_still_refused(
    parts: dict[str, tuple[str, bytes]], members: dict[str, bytes]
) -> None:
    """However the control is declared: folder, content type or relationship type."""
    package = _word_package(parts=parts, members=members)
    assert _refusal("control.docx", package) is DocumentRefusal.ACTIVE_CONTENT


def test_an_embedded_macro_enabled_workbook_is_still_refused() -> None:
    """A macro-enabled content type anywhere in the package is refused, as before."""
    package = _word_package(
        rels=[Rel("rIdX", f"{_REL}/package", "embeddings/Book1.xlsm")],
        parts={"word/embeddings/Book1.xlsm": (_CT_XLSM, XXE_WORKBOOK)},
    )
    assert _refusal("book.docx", package) is DocumentRefusal.MACRO_ENABLED


@pytest.mark.external_data
@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("office_oletools/oleobj_embedded-simple-2007.docx", "contains an embedded file"),
        ("office_oletools/oleobj_embedded-unicode-2007.docx", "embedded object with Unicode"),
        ("office_apache_poi/integration_test_recursive_embedded.docx", "embed_0"),
        ("docx/python-docx/features_shp-inline-shape-access.docx", ""),
        (
            "malicious/office_dde_macro_ole/"
            "oleobj_external_link_sample_with_external_link_to_doc.docx",
            "",
        ),
    ],
)
def test_real_documents_with_embedded_objects_are_accepted(relative: str, expected: str) -> None:
    """Office's own OLE objects, a chart with its workbook, an external OLE link: accepted
    and extracted (the last two have no body text of their own)."""
    path = shared_data(f"documents/{relative}")
    assert expected in extract(inspect_upload(path.name, path.read_bytes())).text


# --- External relationships and remote images: never fetched. ---


@attrs.define
class CountingServer:
    """A local HTTP server that records the path of every request it receives."""

    port: int
    paths: list[str]


@pytest.fixture
def counting_server() -> Iterator[CountingServer]:
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield CountingServer(port=server.server_address[1], paths=paths)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _with_external_targets(port: int) -> bytes:
    """Every way a Word document points outside itself, at the local server."""
    base = f"http://127.0.0.1:{port}"
    body = (
        '<w:p><w:hyperlink r:id="rIdLink"><w:r><w:t>See the report</w:t></w:r></w:hyperlink></w:p>'
        # A linked (not embedded) picture: the remote image.
        "<w:p><w:r><w:drawing><wp:inline><wp:extent cx='1' cy='1'/><wp:docPr id='2' name='p'/>"
        '<a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture">'
        '<pic:pic><pic:blipFill><a:blip r:link="rIdImage"/></pic:blipFill></pic:pic>'
        "</a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"
        # A VML picture with a remote href, and a picture pulled in by a field.
        f'<w:p><w:r><w:pict><v:shape><v:imagedata r:id="rIdVml" o:href="{base}/href.png"/>'
        "</v:shape></w:pict></w:r></w:p>"
        f"<w:p><w:fldSimple w:instr=' INCLUDEPICTURE \"{base}/field.png\" \\d '/></w:p>"
        # An OLE object linked to a remote file (the CVE-2017-0199 shape).
        '<w:p><w:r><w:object><o:OLEObject Type="Link" ProgID="Word.Document.8" '
        'r:id="rIdOleLink" UpdateMode="Always"/></w:object></w:r></w:p>'
    )
    settings = (
        f'<?xml version="1.0"?><w:settings {_NS}><w:attachedTemplate r:id="rIdTemplate"/>'
        "</w:settings>"
    ).encode()
    return _word_package(
        body,
        rels=[
            Rel("rIdLink", f"{_REL}/hyperlink", f"{base}/hyperlink", external=True),
            Rel("rIdImage", f"{_REL}/image", f"{base}/image.png", external=True),
            Rel("rIdVml", f"{_REL}/image", f"{base}/vml.png", external=True),
            Rel("rIdOleLink", f"{_REL}/oleObject", f"{base}/object.doc", external=True),
            Rel("rIdSettings", f"{_REL}/settings", "settings.xml"),
        ],
        parts={"word/settings.xml": (_CT_SETTINGS, settings)},
        members={
            # Remote template injection: Word fetches the template when it opens the file.
            "word/_rels/settings.xml.rels": _rels(
                [
                    Rel(
                        "rIdTemplate",
                        f"{_REL}/attachedTemplate",
                        f"{base}/template.dotm",
                        external=True,
                    )
                ]
            )
        },
    )


def _forbid_network(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    """Record, and refuse, every outbound connection and name lookup."""

    def refuse(name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            calls.append(f"{name}{args[1:] if name.startswith('socket.') else args}")
            raise AssertionError(f"network call during upload or extraction: {name}")

        return refused

    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))


def test_external_relationships_and_remote_images_are_never_fetched(
    counting_server: CountingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hyperlink, linked image, VML href, INCLUDEPICTURE, linked OLE object and attached
    template all point at a live local server: the document is accepted, its text extracted
    and scanned, and the server receives nothing; no connection or lookup is even tried."""
    package = _with_external_targets(counting_server.port)
    calls: list[str] = []
    with monkeypatch.context() as guarded:
        _forbid_network(guarded, calls)
        text = _extracted_text("linked.docx", package)
        scan_text(text)
    assert calls == []
    assert text.split("\n")[:2] == [TEXT[0], "See the report"]
    assert text.endswith(TEXT[1])
    assert counting_server.paths == []
    # The control: the server is live and counts, so the empty list above means something.
    connection = http.client.HTTPConnection("127.0.0.1", counting_server.port, timeout=10)
    connection.request("GET", "/control")
    assert connection.getresponse().status == 200
    connection.close()
    assert counting_server.paths == ["/control"]


def test_the_network_guard_catches_a_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard above is not vacuous: a fetch under it is recorded and fails."""
    calls: list[str] = []
    _forbid_network(monkeypatch, calls)
    with pytest.raises(AssertionError, match="network call"):
        http.client.HTTPConnection("127.0.0.1", 9, timeout=1).request("GET", "/")
    assert calls
