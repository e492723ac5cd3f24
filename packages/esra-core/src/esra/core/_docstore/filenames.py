"""Filename sanitization: a display label, never a path."""

from __future__ import annotations

import re
import unicodedata

from esra.core._encodable import encodable

__all__ = ["MAX_FILENAME_CHARS", "sanitize_filename"]

MAX_FILENAME_CHARS = 200
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f/\\:*?\"<>|]+")


def sanitize_filename(name: str) -> str:
    """Return a safe display name for ``name``.

    Only the last path component survives; lone surrogates become U+FFFD; control
    characters, path separators and
    characters reserved on common filesystems become ``_``; Unicode is NFC-normalized, bidi
    and zero-width format characters are removed; leading dots are dropped so the name is
    never hidden or relative; the result is capped at 200 characters (keeping the
    extension). The store never derives a filesystem path from it: bytes live in a column.
    """
    last = re.split(r"[/\\]", name)[-1]
    # A name read from a non-UTF-8 filesystem holds its undecodable bytes as lone surrogates.
    text = unicodedata.normalize("NFC", encodable(last))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = _UNSAFE.sub("_", text).strip().lstrip(".").strip()
    if not text:
        return "document"
    if len(text) > MAX_FILENAME_CHARS:
        stem, dot, ext = text.rpartition(".")
        if dot and 0 < len(ext) <= 10:
            text = stem[: MAX_FILENAME_CHARS - len(ext) - 1] + "." + ext
        else:
            text = text[:MAX_FILENAME_CHARS]
    return text
