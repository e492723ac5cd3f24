"""OOXML (.docx) checks over inflated members: structure, macros, active content, safe XML.

Every XML part is parsed here with DTDs, entities and external references forbidden
(defusedxml), before any other reader sees the package. The parse streams — no tree is
built — and counts elements: python-docx later holds every element of the package in memory
(about 130 bytes each in lxml), so a package of more than ``MAX_XML_ELEMENTS`` is refused
here, where checking costs no more memory than the inflated bytes. Macro-enabled packages
and packages carrying ActiveX controls or DDE fields are refused: those can run code as Word
opens the file.

Embedded objects (OLE objects, a chart's workbook, embedded packages: the blobs under
``word/embeddings/``) are ignored, as the spec says: ESRA indexes the document's own text and
never renders anything, so an object that only runs when a person activates it in Office is
inert here. Their bytes are inflated under the zip limits like every member, and nothing
else: no check unzips, OLE-parses or scans them, and python-docx keeps them as opaque blobs.
External relationships and remote images (``TargetMode="External"``) are never fetched:
python-docx skips external targets, and nothing here resolves a URL.

Which members are XML is decided as python-docx decides it: by the content type
``[Content_Types].xml`` declares for them, not only by their name. A main document part
stored as ``word/main.dat`` under an XML content type is parsed by python-docx all the same,
so it is parsed (DTD-free, counted) and searched for DDE fields here too.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Mapping
from xml.etree.ElementTree import ParseError
from xml.parsers.expat import errors as expat_errors

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import XMLParser

from esra.core._docstore.refusals import Breach, DocumentRefusedError
from esra.core.codes import DocumentRefusal

__all__ = ["MAX_XML_ELEMENTS", "check_docx_members"]

# Elements in all XML parts of one package. A long real document (a few hundred pages, its
# styles and numbering) holds well under a million; 4 Mi bounds python-docx's tree near
# 0.5 GiB. A part of empty elements (``<a/>``, 4 bytes each) within the 128 MiB inflation
# limit would otherwise hold 32 Mi of them: 4 GiB in the worker.
MAX_XML_ELEMENTS = 4 * 1024 * 1024

_CONTENT_TYPES = "[Content_Types].xml"
_MAIN_PART = "word/document.xml"
_MACRO_MARKERS = ("macroenabled", "vbaproject", "vbadata")
# ActiveX controls: content types ``application/vnd.ms-office.activeX[+xml]``, relationship
# types ``…/activeXControlBinary``, parts under ``word/activeX/``. ``oleObject`` is not here:
# an OLE object is an embedded object, ignored (see the module docstring).
_ACTIVE_MARKERS = ("activex",)
_ACTIVEX_FOLDER = "word/activex/"
# Field instructions: <w:instrText>…</w:instrText> and <w:fldSimple w:instr="…">, matched by
# namespace as the parser reports them (any prefix, character references and CDATA decoded).
# A DDE field's instruction starts with DDE or DDEAUTO; a complex field's instruction may be
# split across runs (Word joins the instrText of a field), so its pieces are joined too.
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_INSTR_TEXT = _W + "instrText"
_FLD_CHAR = _W + "fldChar"
_FLD_CHAR_TYPE = _W + "fldCharType"
_FLD_SIMPLE = _W + "fldSimple"
_INSTR = _W + "instr"
_DDE = re.compile(r"^\s*DDE(?:AUTO)?\b", re.IGNORECASE)
# Enough of an instruction's start to see its keyword; the rest is never kept.
_INSTRUCTION_HEAD = 64
_FIELD_DEPTH = 64
_CT = "{http://schemas.openxmlformats.org/package/2006/content-types}"
# expat reports running out of memory as a parse error ("out of memory"). That is the limit
# of the process checking the package (a sandbox child's address space), not damaged XML:
# it is raised as MemoryError, which fails the check like any exhausted sandbox limit.
_OUT_OF_MEMORY = expat_errors.codes[expat_errors.XML_ERROR_NO_MEMORY]


def _is_xml(name: str, xml_declared: Collection[str]) -> bool:
    """Whether ``name`` is named or declared XML. python-docx parses the parts whose content
    type it knows (all ``…+xml``), except images: any ``xml`` type but an image's counts."""
    partname = "/" + name.lower()
    return (
        partname.endswith((".xml", ".rels"))
        or partname in xml_declared
        or posixpath.splitext(partname)[1] in xml_declared
    )


class _TooManyElementsError(Exception):
    pass


class _ElementCounter:
    """A parser target that keeps (almost) nothing: it counts elements against what is left,
    notes whether a field instruction starts with DDE, and, while ``declaring`` (parsing
    ``[Content_Types].xml``, and only then), records which part names (``/partname``) and
    extensions (``.ext``), lower-cased, are declared an XML type python-docx may parse."""

    def __init__(self, allowed: int) -> None:
        self.left = allowed
        self.dde = False
        self.declaring = False
        self.xml_declared: set[str] = set()
        self._fields: list[str] = []  # the head of each open complex field's instruction
        self._in_instruction = False

    def start(self, tag: str, attributes: Mapping[str, str]) -> None:
        self.left -= 1
        if self.left < 0:
            raise _TooManyElementsError
        if tag == _INSTR_TEXT:
            self._in_instruction = True
            if not self._fields:
                self._fields.append("")
        elif tag == _FLD_CHAR:
            kind = attributes.get(_FLD_CHAR_TYPE)
            if kind == "begin":
                # Nesting deeper than any document's is kept as its innermost field only.
                if len(self._fields) < _FIELD_DEPTH:
                    self._fields.append("")
                else:
                    self._fields[-1] = ""
            elif kind == "end" and self._fields:
                self._fields.pop()
        elif tag == _FLD_SIMPLE:
            self._note_instruction(attributes.get(_INSTR, ""))
        elif self.declaring and tag == _CT + "Default":
            self._declare("." + attributes.get("Extension", ""), attributes)
        elif self.declaring and tag == _CT + "Override":
            self._declare(attributes.get("PartName", ""), attributes)

    def data(self, text: str) -> None:
        if self._in_instruction and self._fields:
            head = (self._fields[-1] + text).lstrip()[:_INSTRUCTION_HEAD]
            self._fields[-1] = head
            self._note_instruction(head)

    def end(self, tag: str) -> None:
        if tag == _INSTR_TEXT:
            self._in_instruction = False

    def close(self) -> None:
        self._fields.clear()
        self._in_instruction = False

    def _note_instruction(self, instruction: str) -> None:
        if _DDE.match(instruction):
            self.dde = True

    def _declare(self, key: str, attributes: Mapping[str, str]) -> None:
        # Any XML declaration of a name counts, even one a later declaration replaces.
        declared = attributes.get("ContentType", "").lower()
        if declared.endswith("xml") and not declared.startswith("image/"):
            self.xml_declared.add(key.lower())


def _stream_parse(data: bytes, counter: _ElementCounter) -> None:
    """Parse ``data`` through ``counter`` with DTDs, entities and external references
    forbidden, building nothing."""
    parser = XMLParser(target=counter, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    parser.feed(data)
    parser.close()


def _parse_safely(name: str, data: bytes, counter: _ElementCounter) -> None:
    try:
        _stream_parse(data, counter)
    except _TooManyElementsError as exc:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT,
            detail=f"more than {MAX_XML_ELEMENTS} XML elements (at {name})",
            breach=Breach.XML_ELEMENT_COUNT,
        ) from exc
    except DefusedXmlException as exc:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT,
            detail=f"DTD or entity in {name}",
            breach=Breach.XML_DTD_OR_ENTITY,
        ) from exc
    except (ParseError, ValueError) as exc:
        if getattr(exc, "code", None) == _OUT_OF_MEMORY:
            raise MemoryError(f"XML parser out of memory (at {name})") from exc
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT,
            detail=f"invalid XML in {name}",
            breach=Breach.XML_INVALID,
        ) from exc


def check_docx_members(members: Mapping[str, bytes]) -> None:
    """Refuse anything but a plain, well-formed Word document package.

    Raises:
        DocumentRefusedError: ``TYPE_MISMATCH`` (not a Word package), ``MACRO_ENABLED``,
            ``ACTIVE_CONTENT`` or ``MALFORMED_DOCUMENT`` (unsafe or invalid XML).
    """
    # XML first: an entity or DTD anywhere is refused whatever else the package is. That
    # includes an XML-named member under word/embeddings/ (Office never writes one): which
    # parts python-docx parses is decided by declared content types, not by folder.
    # The content types first: they say which other members are XML.
    counter = _ElementCounter(MAX_XML_ELEMENTS)
    if _CONTENT_TYPES in members:
        counter.declaring = True
        _parse_safely(_CONTENT_TYPES, members[_CONTENT_TYPES], counter)
        counter.declaring = False
    for name, data in members.items():
        if name != _CONTENT_TYPES and _is_xml(name, counter.xml_declared):
            _parse_safely(name, data, counter)
    if _CONTENT_TYPES not in members or _MAIN_PART not in members:
        raise DocumentRefusedError(DocumentRefusal.TYPE_MISMATCH, detail="not a Word package")
    lowered_names = [name.lower() for name in members]
    declared = b" ".join(
        data.lower()
        for name, data in members.items()
        if name == _CONTENT_TYPES or name.endswith(".rels")
    )
    if any(m.encode() in declared for m in _MACRO_MARKERS) or any(
        "vbaproject" in n for n in lowered_names
    ):
        raise DocumentRefusedError(DocumentRefusal.MACRO_ENABLED, detail="macro content")
    if any(m.encode() in declared for m in _ACTIVE_MARKERS) or any(
        n.startswith(_ACTIVEX_FOLDER) for n in lowered_names
    ):
        raise DocumentRefusedError(DocumentRefusal.ACTIVE_CONTENT, detail="ActiveX control")
    # DDE lives in field instructions (w:instrText, w:fldSimple/@w:instr), noted as parsed.
    if counter.dde:
        raise DocumentRefusedError(DocumentRefusal.ACTIVE_CONTENT, detail="DDE field")
