"""Document formats, recognised by magic bytes from the header only.

Nothing here inflates, parses or decodes more than the first bytes: a type decision is made
before any zip member is read, so a zip bomb or an XML entity is never reached by sniffing.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ACCEPTED_EXTENSIONS",
    "DocumentFormat",
    "HeaderKind",
    "sniff_header",
]

HEADER_BYTES = 8192
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ZIP = (b"PK\x03\x04", b"PK\x05\x06")
# The PDF header may follow a little leading junk; readers accept it within the first 1 KiB.
_PDF_WINDOW = 1024
_TEXT_CONTROLS = frozenset(b"\t\n\r\x0c")


class DocumentFormat(StrEnum):
    """The formats the store accepts."""

    TXT = "txt"
    MD = "md"
    CSV = "csv"
    PDF = "pdf"
    DOCX = "docx"


class HeaderKind(StrEnum):
    """What the header bytes say a file is."""

    PDF = "pdf"
    ZIP = "zip"
    OLE = "ole"
    TEXT = "text"
    # Text in a legacy 8-bit encoding (Latin-1, Windows-1252): readable, but not UTF-8.
    NON_UTF8_TEXT = "non-UTF-8 text"
    BINARY = "binary"


ACCEPTED_EXTENSIONS: dict[str, DocumentFormat] = {
    ".txt": DocumentFormat.TXT,
    ".md": DocumentFormat.MD,
    ".markdown": DocumentFormat.MD,
    ".csv": DocumentFormat.CSV,
    ".pdf": DocumentFormat.PDF,
    ".docx": DocumentFormat.DOCX,
}


def _looks_like_text(header: bytes) -> bool:
    if header.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True  # UTF-16 with a byte-order mark
    if b"\x00" in header:
        return False
    try:
        header.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the header window is still text.
        return exc.start >= len(header) - 3
    return True


def _looks_like_8bit_text(header: bytes) -> bool:
    """No NUL and (almost) no C0 controls but tab, newlines and form feed: text, not binary."""
    if b"\x00" in header:
        return False
    controls = sum(1 for byte in header if byte < 0x20 and byte not in _TEXT_CONTROLS)
    return controls <= len(header) // 100


def sniff_header(data: bytes) -> HeaderKind:
    """Classify ``data`` by its first bytes only."""
    header = data[:HEADER_BYTES]
    if header.startswith(_OLE):
        return HeaderKind.OLE
    if header.startswith(_ZIP):
        return HeaderKind.ZIP
    if b"%PDF-" in header[:_PDF_WINDOW]:
        return HeaderKind.PDF
    if _looks_like_text(header):
        return HeaderKind.TEXT
    if _looks_like_8bit_text(header):
        return HeaderKind.NON_UTF8_TEXT
    return HeaderKind.BINARY
