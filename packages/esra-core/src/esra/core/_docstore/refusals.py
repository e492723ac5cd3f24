"""Document refusals: a classified reason and the remedy an operator can act on.

A reason may cover several causes: every safety-limit breach of a ``.docx`` is
``MALFORMED_DOCUMENT`` (the spec's classification), and a text file that is not UTF-8 is a
``TYPE_MISMATCH``. Telling the operator "re-export it" for a zip bomb, or "use its real
extension" for a Latin-1 file, sends them the wrong way, so such a refusal also names the
``Breach`` it was, and the remedy is that breach's.
"""

from __future__ import annotations

from enum import StrEnum

from esra.core.codes import DocumentRefusal, ErrorCode
from esra.core.exceptions import EsraError

__all__ = [
    "BREACH_REMEDIES",
    "REMEDIES",
    "STORED_BREACHES",
    "Breach",
    "DocumentRefusedError",
    "remedy_for",
]

REMEDIES: dict[DocumentRefusal, str] = {
    DocumentRefusal.EMPTY_DOCUMENT: "The file is empty. Upload a file with content.",
    DocumentRefusal.TOO_LARGE: "The file exceeds the store's size limit. Split it and retry.",
    DocumentRefusal.UNSUPPORTED_TYPE: (
        "Only .txt, .md, .csv, .pdf and .docx files are supported. Convert the file and retry."
    ),
    DocumentRefusal.LEGACY_DOC: "Legacy .doc files are not supported: convert to .docx and retry.",
    DocumentRefusal.MACRO_ENABLED: (
        "Macro-enabled documents are refused. Save the document as a plain .docx and retry."
    ),
    DocumentRefusal.ACTIVE_CONTENT: (
        "The document carries active content (ActiveX controls or DDE fields). Remove it, "
        "save as a plain document and retry."
    ),
    DocumentRefusal.TYPE_MISMATCH: (
        "The file's content does not match its extension. Upload it with its real extension."
    ),
    DocumentRefusal.PASSWORD_PROTECTED: (
        "The document is password-protected. Remove the password and upload it again."
    ),
    DocumentRefusal.MALFORMED_DOCUMENT: (
        "The document is damaged or breaks a safety limit and was not indexed. Re-export it "
        "from its original application and retry."
    ),
    DocumentRefusal.DUPLICATE_DOCUMENT: "The same content is already stored.",
    DocumentRefusal.INJECTION_SUSPECTED: (
        "The text contains instructions aimed at AI models and this store rejects such "
        "documents. Remove them, or ask an administrator to quarantine instead of reject."
    ),
    DocumentRefusal.TEXT_TOO_LONG: (
        "The document's extracted text is longer than the store's limit and was not indexed. "
        "Split it into smaller documents and upload those."
    ),
    DocumentRefusal.TOO_MANY_SEGMENTS: (
        "The document splits into more sections (headings, pages, rows or paragraphs) than "
        "the store's segment limit and was not indexed. Split it into smaller documents, or "
        "merge its very short sections, and upload again."
    ),
}


class Breach(StrEnum):
    """Which rule a refused document broke, when its reason alone does not say."""

    ZIP_ENTRY_COUNT = "zip_entry_count"
    ZIP_INFLATED_SIZE = "zip_inflated_size"
    ZIP_COMPRESSION_RATIO = "zip_compression_ratio"
    ZIP_STRUCTURE = "zip_structure"
    XML_DTD_OR_ENTITY = "xml_dtd_or_entity"
    XML_INVALID = "xml_invalid"
    XML_ELEMENT_COUNT = "xml_element_count"
    TEXT_NOT_UTF8 = "text_not_utf8"


BREACH_REMEDIES: dict[Breach, str] = {
    Breach.ZIP_ENTRY_COUNT: (
        "The package holds more files than the store's entry-count limit (a safety limit "
        "against zip bombs). A plain Word document stays far below it: save the document "
        "again as a plain .docx without embedded files and retry."
    ),
    Breach.ZIP_INFLATED_SIZE: (
        "The package unpacks to more than the store's uncompressed-size limit (a zip-bomb "
        "safety limit). Remove large embedded media or split the document, then retry."
    ),
    Breach.ZIP_COMPRESSION_RATIO: (
        "A part of the package compresses far more than real documents do (a zip-bomb "
        "safety limit on the compression ratio). Re-export the document from its original "
        "application as a plain .docx and retry."
    ),
    Breach.ZIP_STRUCTURE: (
        "The package's zip structure is unsafe (overlapping, duplicate, absolute or "
        "parent-directory entries, or links). Re-export the document from its original "
        "application and retry."
    ),
    Breach.XML_DTD_OR_ENTITY: (
        "The document's XML declares a DTD or entities, which the store refuses (they enable "
        "XXE and entity-expansion attacks). Word never writes them: re-save the document in "
        "Word or LibreOffice as a plain .docx and retry."
    ),
    Breach.XML_INVALID: (
        "The document's XML is damaged. Re-export it from its original application and retry."
    ),
    Breach.XML_ELEMENT_COUNT: (
        "The document's XML holds more elements than the store's limit (a safety limit on "
        "the memory reading it takes). Split the document, or remove large tables and "
        "embedded content, and retry."
    ),
    Breach.TEXT_NOT_UTF8: (
        "The file is not UTF-8 text (it may be Latin-1 or Windows-1252). Save it as UTF-8 "
        "in your editor and upload it again."
    ),
}


# The breaches of a ``.docx`` package's safety limits (spec 004: a zip bomb or XXE "yields a
# failed document with a MALFORMED_DOCUMENT classification"). Such a file is stored as a
# Failed document, bytes kept and never inflated or parsed again unless re-indexed by hand,
# so the operator finds it on the review screen. A text file that is not UTF-8 is not one:
# nothing about it is unsafe, it is refused at upload with "save it as UTF-8".
STORED_BREACHES = frozenset(
    {
        Breach.ZIP_ENTRY_COUNT,
        Breach.ZIP_INFLATED_SIZE,
        Breach.ZIP_COMPRESSION_RATIO,
        Breach.ZIP_STRUCTURE,
        Breach.XML_DTD_OR_ENTITY,
        Breach.XML_INVALID,
        Breach.XML_ELEMENT_COUNT,
    }
)


def remedy_for(refusal: DocumentRefusal, breach: Breach | None = None) -> str:
    """The remedy an operator reads: the breach's when there is one, else the reason's."""
    return BREACH_REMEDIES[breach] if breach is not None else REMEDIES[refusal]


class DocumentRefusedError(EsraError):
    """One document was refused (at upload) or failed (at extraction), with its remedy.

    The message is the remedy, fixed text safe to show an operator: the ``breach``'s when one
    is given, else the reason's. ``detail`` (for the log only) may say more. For duplicates
    the caller adds the existing title.
    """

    code = ErrorCode.ESRA_INVALID_REQUEST

    def __init__(
        self, refusal: DocumentRefusal, *, detail: str = "", breach: Breach | None = None
    ) -> None:
        self.refusal = refusal
        self.breach = breach
        self.remedy = remedy_for(refusal, breach)
        self.detail = detail
        super().__init__(self.remedy)
