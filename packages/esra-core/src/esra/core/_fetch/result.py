"""FetchedDocument: what ``esra_{slug}_fetch`` returns — one page of one surfaced record."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

__all__ = ["FetchedDocument"]


@attrs.frozen
class FetchedDocument:
    """A page of a record's text, after the field allowlist, masking and the size cap: title,
    fields (names and values) and ``text`` together fit the exposure's ``size_cap_chars``.

    ``text`` is ``total_chars`` long in all, of which this page starts at ``offset``;
    ``has_more`` says whether ``next_offset`` would return more. ``total_chars`` is exact
    when every part of the record was read (always for the document store) and ``None``
    when a source holds more parts than one fetch may read.
    """

    source: str
    title: str
    text: str
    offset: int
    total_chars: int | None
    has_more: bool
    correlation_id: str
    fields: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, or ``None`` when this page is the last."""
        return self.offset + len(self.text) if self.has_more else None
