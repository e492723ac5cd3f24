"""Document refusals: a classified reason and the remedy an operator can act on."""

from __future__ import annotations

from esra.core.codes import DocumentRefusal, ErrorCode
from esra.core.exceptions import EsraError

__all__ = ["REMEDIES", "DocumentRefusedError"]

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
        "The document carries active content (embedded objects, ActiveX controls or DDE "
        "fields). Remove it, save as a plain document and retry."
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
}


class DocumentRefusedError(EsraError):
    """One document was refused (at upload) or failed (at extraction), with its remedy.

    The message is the remedy, fixed text safe to show an operator; ``detail`` (for the log
    only) may say which limit broke. For duplicates the caller adds the existing title.
    """

    code = ErrorCode.ESRA_INVALID_REQUEST

    def __init__(self, refusal: DocumentRefusal, *, detail: str = "") -> None:
        self.refusal = refusal
        self.remedy = REMEDIES[refusal]
        self.detail = detail
        super().__init__(self.remedy)
