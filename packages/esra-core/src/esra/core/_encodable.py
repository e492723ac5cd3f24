"""Text every store can encode: lone surrogates replaced, one for one.

Python strings may hold lone surrogates (U+D800–U+DFFF), which have no UTF-8 form: pypdf
decodes a font's ToUnicode targets with ``surrogatepass``, and a file name read from a
non-UTF-8 filesystem keeps its undecodable bytes as surrogates (``surrogateescape``). SQLite
and PostgreSQL refuse such text when it is bound, which would fail the store's write for the
whole batch or turn rather than the one file. Each surrogate becomes one U+FFFD, so lengths
and every offset computed before (segment boundaries, page starts) stay valid. Where text
must not be altered (a configured identifier), ``has_lone_surrogate`` tells it is unsendable.
"""

from __future__ import annotations

import re

__all__ = ["encodable", "has_lone_surrogate"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the same length)."""
    # ASCII, the common case of every audit field, holds none: no pattern scan for it.
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate, which no UTF-8 or UTF-16 text can carry."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None
