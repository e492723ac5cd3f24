"""Upload inspection: the checks every file passes before it is stored as Pending.

Order matters and is cheap-first: size, extension, header magic, then (for .docx) the zip
structure and counted inflation, then the XML. Nothing is inflated or parsed before the type
is known, and a refusal always carries a classified reason and a remedy.

The .docx checks run in a child of the extraction sandbox (``ExtractionSandbox``), under
``UploadLimits.sandbox``, never in the process serving the upload: the zip guard and the
element cap bound a package's bytes, not what checking it costs (within them, 12 M distinct
attributes took that process 52 s of CPU and 2 GB, a bomb at the guard's limits 128 MiB).
A package whose checks exhaust their child is refused as ``MALFORMED_DOCUMENT``; every
other gets what the checks say, as when they ran here. The text checks below are
linear in the upload's bytes and stay in the process.

A ``.docx`` whose package breaks a safety limit (zip bomb, unsafe structure, DTD or entity,
damaged XML) is not refused: it is accepted *as a breach* (``AcceptedUpload.breach``), and
the repository stores it as a Failed ``MALFORMED_DOCUMENT`` naming the limit, bytes kept,
never a partial index (spec 004). Macros, active content and type mismatches are still
refused, since there is nothing for an operator to review.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

import attrs

from esra.core._docstore.filenames import sanitize_filename
from esra.core._docstore.formats import (
    ACCEPTED_EXTENSIONS,
    DocumentFormat,
    HeaderKind,
    sniff_header,
)
from esra.core._docstore.refusals import STORED_BREACHES, Breach, DocumentRefusedError
from esra.core._docstore.sandbox import (
    ExtractionSandbox,
    SandboxLimits,
    answer_refusal,
    default_sandbox,
)
from esra.core._docstore.zipguard import ZipLimits
from esra.core.codes import DocumentRefusal

__all__ = ["AcceptedUpload", "UploadLimits", "inspect_upload"]

_LEGACY = frozenset({".doc", ".dot"})
_MACRO = frozenset({".docm", ".dotm", ".xlsm", ".xltm", ".pptm", ".potm", ".ppsm"})
_TEXT_FORMATS = frozenset({DocumentFormat.TXT, DocumentFormat.MD, DocumentFormat.CSV})
# An OLE container named .docx is encrypted OOXML when it holds these streams (UTF-16LE names).
_ENCRYPTED_OOXML = ("EncryptionInfo".encode("utf-16-le"), "EncryptedPackage".encode("utf-16-le"))
# A spreadsheet cell that launches a DDE command: =cmd|'...'!A0, +cmd|..., @SUM(...)|...
# A quoted cell ends at its closing quote, not at a separator or line break (``""`` is a
# quote inside it): "=cmd|' /C calc,x'!A0" is one cell. Linear by construction (a 25 MB
# upload is matched in the request): the leading blanks exclude newline and tab, which also
# start a cell, and the possessive runs stop at the first ``|`` and then the first ``!`` of
# the cell instead of backtracking through it; a quoted run stops at the first lone quote,
# and a later cell can only start after one.
_CSV_DDE = re.compile(
    r"(?m)(?:^|[,;\t])[ \r\f\v]*+"
    r"(?:\"[ \r\f\v]*+[=+\-@](?:[^\"|]|\"\")*+\|(?:[^\"!]|\"\")*+!"
    r"|\"?[=+\-@][^,;\t\n|]*+\|[^,;\t\n!]*+!)"
)


@attrs.frozen
class UploadLimits:
    """Per-store upload limits; ``sandbox`` bounds the child a .docx package is checked in."""

    max_bytes: int = 25 * 1024 * 1024
    zip: ZipLimits = attrs.field(factory=ZipLimits)
    sandbox: SandboxLimits = attrs.field(factory=SandboxLimits)


@attrs.frozen
class AcceptedUpload:
    """A file that passed inspection: safe display name, format, bytes and content hash.

    ``breach`` names the safety limit a ``.docx`` package broke, when it did: the file is
    stored as a Failed document with that classification instead of being queued.
    """

    display_name: str
    format: DocumentFormat
    data: bytes = attrs.field(repr=False)
    sha256: str
    breach: Breach | None = None


def _format_for(filename: str) -> DocumentFormat:
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    if suffix in _LEGACY:
        raise DocumentRefusedError(DocumentRefusal.LEGACY_DOC)
    if suffix in _MACRO:
        raise DocumentRefusedError(DocumentRefusal.MACRO_ENABLED, detail=f"{suffix} extension")
    try:
        return ACCEPTED_EXTENSIONS[suffix]
    except KeyError:
        raise DocumentRefusedError(DocumentRefusal.UNSUPPORTED_TYPE, detail=suffix) from None


def _not_utf8() -> DocumentRefusedError:
    # Its content is text, so "use the real extension" would mislead: say "save as UTF-8".
    return DocumentRefusedError(
        DocumentRefusal.TYPE_MISMATCH, detail="not UTF-8 text", breach=Breach.TEXT_NOT_UTF8
    )


def _check_text(data: bytes, document_format: DocumentFormat) -> None:
    try:
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            text = data.decode("utf-16")
        else:
            text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _not_utf8() from exc
    if "\x00" in text:
        raise DocumentRefusedError(DocumentRefusal.TYPE_MISMATCH, detail="NUL in text")
    if document_format is DocumentFormat.CSV and _CSV_DDE.search(text):
        raise DocumentRefusedError(DocumentRefusal.ACTIVE_CONTENT, detail="DDE formula in a cell")


def _check_ole_docx(data: bytes) -> None:
    if all(marker in data for marker in _ENCRYPTED_OOXML):
        raise DocumentRefusedError(DocumentRefusal.PASSWORD_PROTECTED, detail="encrypted OOXML")
    raise DocumentRefusedError(DocumentRefusal.TYPE_MISMATCH, detail="OLE container named .docx")


def _package_breach(
    data: bytes, limits: UploadLimits, sandbox: ExtractionSandbox, holder: str | None
) -> Breach | None:
    """Check a ``.docx`` package in a sandbox child; return the safety limit it broke, if it
    broke one."""
    answer = sandbox.check_docx_package(data, limits.sandbox, limits.zip, holder=holder)
    if answer.get("checked") is True and "refusal" not in answer:
        return None
    refused = answer_refusal(answer)
    if refused.breach in STORED_BREACHES:
        return refused.breach
    raise refused


def inspect_upload(
    filename: str,
    data: bytes,
    limits: UploadLimits | None = None,
    *,
    sandbox: ExtractionSandbox | None = None,
    holder: str | None = None,
) -> AcceptedUpload:
    """Inspect one uploaded file; return it accepted (or accepted as a breach) or refuse it.

    Type is decided by magic bytes from the header and must agree with the extension.
    ``.doc`` is refused with "convert to .docx"; macro-enabled formats are refused outright.
    A ``.docx`` is additionally checked as a zip (structure, counted inflation, limits) and
    as OOXML (no macros, no active content, every XML part parsed with DTDs forbidden), in
    a child of ``sandbox`` (the process-wide one by default) under ``limits.sandbox``, lent
    to ``holder`` (the tenant: no tenant holds every sandbox server at once); a package that
    breaks one of those safety limits is returned with ``breach`` set.
    PDF structure and encryption are checked at extraction, in a sandboxed subprocess.

    Raises:
        DocumentRefusedError: with the classified reason and its remedy;
            ``MALFORMED_DOCUMENT`` for a .docx whose checks exhausted their child.
        MissingExtraError: a .docx without the ``documents`` extra installed (the sandbox
            server needs it).
    """
    limits = limits or UploadLimits()
    if not data:
        raise DocumentRefusedError(DocumentRefusal.EMPTY_DOCUMENT)
    if len(data) > limits.max_bytes:
        raise DocumentRefusedError(DocumentRefusal.TOO_LARGE)
    document_format = _format_for(filename)
    kind = sniff_header(data)
    breach = None
    if document_format is DocumentFormat.PDF:
        if kind is not HeaderKind.PDF:
            raise DocumentRefusedError(DocumentRefusal.TYPE_MISMATCH, detail=f"header says {kind}")
    elif document_format is DocumentFormat.DOCX:
        if kind is HeaderKind.OLE:
            _check_ole_docx(data)
        if kind is not HeaderKind.ZIP:
            raise DocumentRefusedError(DocumentRefusal.TYPE_MISMATCH, detail=f"header says {kind}")
        breach = _package_breach(data, limits, sandbox or default_sandbox(), holder)
    elif document_format in _TEXT_FORMATS:
        if kind is HeaderKind.NON_UTF8_TEXT:
            raise _not_utf8()
        if kind is not HeaderKind.TEXT:
            raise DocumentRefusedError(DocumentRefusal.TYPE_MISMATCH, detail=f"header says {kind}")
        _check_text(data, document_format)
    return AcceptedUpload(
        display_name=sanitize_filename(filename),
        format=document_format,
        data=data,
        sha256=hashlib.sha256(data).hexdigest(),
        breach=breach,
    )
