"""OOXML (.docx) checks over inflated members: structure, macros, active content, safe XML.

Every XML part is parsed here with DTDs, entities and external references forbidden
(defusedxml), before any other reader sees the package. External relationships, embedded
objects and remote images are never fetched; macro-enabled packages and packages carrying
ActiveX controls, OLE objects or DDE fields are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from esra.core.codes import DocumentRefusal
from esra.core.docstore.refusals import Breach, DocumentRefusedError

__all__ = ["check_docx_members"]

_CONTENT_TYPES = "[Content_Types].xml"
_MAIN_PART = "word/document.xml"
_MACRO_MARKERS = ("macroenabled", "vbaproject", "vbadata")
_ACTIVE_MARKERS = ("activex", "oleobject")
# Field instructions: <w:instrText>…</w:instrText> and <w:fldSimple w:instr="…">. A DDE
# field's instruction starts with DDE or DDEAUTO (quoted pieces may be split across runs, the
# keyword is not).
_INSTRUCTIONS = re.compile(
    rb"<w:instrText\b[^>]*>([^<]*)</w:instrText>|\bw:instr\s*=\s*[\"']([^\"']*)[\"']"
)
_DDE = re.compile(rb"^\s*DDE(?:AUTO)?\b", re.IGNORECASE)


def _is_xml(name: str) -> bool:
    return name.lower().endswith((".xml", ".rels"))


def _parse_safely(name: str, data: bytes) -> None:
    try:
        fromstring(data, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise DocumentRefusedError(
            DocumentRefusal.MALFORMED_DOCUMENT,
            detail=f"DTD or entity in {name}",
            breach=Breach.XML_DTD_OR_ENTITY,
        ) from exc
    except (ParseError, ValueError) as exc:
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
    # XML first: an entity or DTD anywhere is refused whatever else the package is.
    for name, data in members.items():
        if _is_xml(name):
            _parse_safely(name, data)
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
        n.startswith(("word/activex/", "word/embeddings/")) for n in lowered_names
    ):
        raise DocumentRefusedError(
            DocumentRefusal.ACTIVE_CONTENT, detail="embedded object or control"
        )
    # DDE lives in field instructions (w:instrText, w:fldSimple/@w:instr) of the story parts.
    for name, data in members.items():
        if not (name.startswith("word/") and name.endswith(".xml")):
            continue
        for match in _INSTRUCTIONS.finditer(data):
            if _DDE.match(match.group(1) or match.group(2) or b""):
                raise DocumentRefusedError(DocumentRefusal.ACTIVE_CONTENT, detail="DDE field")
