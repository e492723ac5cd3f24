"""Paging a stored document's text for ``esra_{slug}_fetch``: exact totals for the store."""

from __future__ import annotations

import attrs

__all__ = ["FetchPage", "page_text"]


@attrs.frozen
class FetchPage:
    """One page of a document. For the store, ``total_chars`` and ``has_more`` are exact:
    the text is rebuilt from its segments, concatenated in ordinal order."""

    text: str
    offset: int
    total_chars: int
    has_more: bool


def page_text(text: str, *, offset: int, max_chars: int) -> FetchPage:
    """Return ``text[offset : offset + max_chars]`` with the exact total and continuation."""
    start = min(max(0, offset), len(text))
    end = min(len(text), start + max(0, max_chars))
    return FetchPage(
        text=text[start:end], offset=start, total_chars=len(text), has_more=end < len(text)
    )
