"""Text every store can encode: lone surrogates replaced, one for one.

Python strings may hold lone surrogates (U+D800–U+DFFF), which have no UTF-8 form: pypdf
decodes a font's ToUnicode targets with ``surrogatepass``, and a file name read from a
non-UTF-8 filesystem keeps its undecodable bytes as surrogates (``surrogateescape``). SQLite
and PostgreSQL refuse such text when it is bound, which would fail the store's write for the
whole batch or turn rather than the one file. Each surrogate becomes one U+FFFD, so lengths
and every offset computed before (segment boundaries, page starts) stay valid.
"""

from __future__ import annotations

import re

__all__ = ["encodable"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the same length)."""
    return _LONE_SURROGATE.sub("\ufffd", text)
