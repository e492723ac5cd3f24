"""Fragments: bounded excerpts of a record's content around the terms that found it.

Retrieval returns fragments, never whole records, so responses and rerank prompts stay bounded
whatever a source stores. Marker text is stripped here too: a fragment is untrusted content
on its way to a model or an AI client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping as AbcMapping
from collections.abc import Sequence

from esra.core._config.mapping import Mapping
from esra.core._prompts.markers import strip_markers

__all__ = ["ELLIPSIS", "collapsed", "content_text", "make_fragment"]

ELLIPSIS = "…"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ASCII_CONTROLS_TO_SPACES = str.maketrans(dict.fromkeys([*range(0x20), 0x7F], " "))


def collapsed(text: str) -> str:
    """``text`` with every control character a space, whitespace runs one space, trimmed.

    Control characters become spaces before collapsing, so words either side stay apart.
    """
    if text.isprintable():
        # No control character (C0 and C1 controls are never printable): nothing to replace.
        return " ".join(text.split())
    if text.isascii():
        # A byte-to-byte table: about ten times the regular expression's speed on ASCII.
        return " ".join(text.translate(_ASCII_CONTROLS_TO_SPACES).split())
    return " ".join(_CONTROL.sub(" ", text).split())


def _clean(text: str) -> str:
    return collapsed(strip_markers(text))


def _first_match(text: str, terms: Sequence[str]) -> tuple[int, int]:
    """Return (position, length) of the earliest case-insensitive term match, or (0, 0)."""
    best: tuple[int, int] | None = None
    # ASCII text can only match case-insensitively as its lower case does (Unicode's other
    # case pairs, such as K and the Kelvin sign, need a character ASCII does not have), and
    # lowering it keeps every position; a plain find then does what the regex did, faster.
    lowered = text.lower() if text.isascii() else None
    for term in terms:
        needle = " ".join(term.split())
        if not needle:
            continue
        if lowered is not None and needle.isascii():
            position = lowered.find(needle.lower())
            if position < 0:
                continue
            candidate = (position, len(needle))
        else:
            found = re.search(re.escape(needle), text, flags=re.IGNORECASE)
            if found is None:
                continue
            candidate = (found.start(), found.end() - found.start())
        # Earliest wins; at one position the longer match shows more of what was searched.
        if best is None or (candidate[0], -candidate[1]) < (best[0], -best[1]):
            best = candidate
    return best or (0, 0)


# A long text is first cleaned only up to a safe boundary past this many characters per
# fragment character (plus a little): enough that a window around a match near its start is
# known without cleaning the rest (see ``_head``). A boundary is looked for this far past that.
_HEAD_CHARS_PER_FRAGMENT_CHAR = 3
_HEAD_SLACK_CHARS = 64
_BOUNDARY_SEARCH_CHARS = 4096
# Where a head may end: after a printable ASCII character no marker token can hold, in the
# text or folded (ASCII folds to itself). A token is made only of whitespace, "_", "-" and
# the letters of END, ESRA and DATA, in any case ("<<" before its spaced form is looked at,
# never part of it).
_TOKEN_CHARACTERS = frozenset("_-endsratENDSRAT")
_BOUNDARY = re.compile(
    "["
    + "".join(
        re.escape(chr(code)) for code in range(0x21, 0x7F) if chr(code) not in _TOKEN_CHARACTERS
    )
    + "]"
)


def make_fragment(text: str, terms: Sequence[str], max_chars: int) -> str:
    """Return at most ``max_chars`` characters of ``text`` around the first matching term.

    Whitespace is collapsed, control characters and marker text removed. A text that fits is
    returned whole; otherwise a window around the earliest match of any of ``terms`` (or the
    start, if none matches) is cut on word boundaries where possible and marked with ``…`` on
    each side that was cut. A term no longer than ``max_chars − 2`` is always kept whole.

    The work grows with the window, not the record, when a term matches near the start of a
    long text: only its head is cleaned, and the window cut from it is exactly the one the
    whole text gives (else the whole text is cleaned).
    """
    if max_chars <= 0:
        return ""
    head = _head(text, max_chars)
    if head is not None:
        window = _head_window(_clean(head), terms, max_chars)
        if window is not None:
            return window
    clean = _clean(text)
    if len(clean) <= max_chars:
        return clean
    pos, length = _first_match(clean, terms)
    return _cut(clean, pos, length, max_chars)


def _head(text: str, max_chars: int) -> str | None:
    """The start of a long ``text`` up to and including a boundary character, or ``None``.

    Cleaning it gives the start of cleaning the whole text: no marker token holds the
    boundary (a full stop, a digit, a letter outside the token's…), in the text or folded
    (folding is per character and keeps ASCII), so no token, and no token that removing
    another assembles, can span the cut: marker stripping never joins what stands either
    side of it, and whitespace collapsing is local. ``None`` when the text is not long enough
    to be worth it or no boundary comes soon enough.
    """
    at_least = _HEAD_CHARS_PER_FRAGMENT_CHAR * max_chars + _HEAD_SLACK_CHARS
    if len(text) <= 2 * at_least:
        return None
    found = _BOUNDARY.search(text, at_least, at_least + _BOUNDARY_SEARCH_CHARS)
    return text[: found.end()] if found is not None else None


def _head_window(clean: str, terms: Sequence[str], max_chars: int) -> str | None:
    """The fragment of a text whose cleaned start is ``clean``, when the rest cannot change it.

    That is when a term matched, no match starting at or before it can run past the head,
    and the window ends inside the head; otherwise ``None``.
    """
    if len(clean) <= max_chars:
        return None
    pos, length = _first_match(clean, terms)
    longest = max((len(" ".join(term.split())) for term in terms), default=0)
    if length == 0 or pos + longest > len(clean):
        return None
    if _start_and_end(len(clean), pos, length, max_chars)[1] >= len(clean):
        return None
    return _cut(clean, pos, length, max_chars)


def _inner(max_chars: int) -> int:
    # Two characters are reserved for the ellipses; a tiny budget gets a bare cut instead.
    return max_chars - 2 if max_chars > 2 else max_chars


def _start_and_end(size: int, pos: int, length: int, max_chars: int) -> tuple[int, int]:
    """The window's bounds before snapping to words, in a cleaned text of ``size``."""
    inner = _inner(max_chars)
    lead = (inner - (0 if length > inner else length)) // 3
    start = max(0, pos - lead)
    end = min(size, start + inner)
    return max(0, end - inner), end


def _cut(clean: str, pos: int, length: int, max_chars: int) -> str:
    """The window of ``clean`` (longer than ``max_chars``) around the match at ``pos``."""
    if length > _inner(max_chars):
        length = 0
    start, end = _start_and_end(len(clean), pos, length, max_chars)
    # Snap to word boundaries, but never into the matched term.
    if start > 0 and clean[start - 1] != " ":
        space = clean.find(" ", start, pos)
        if space != -1:
            start = space + 1
    if end < len(clean) and clean[end] != " ":
        space = clean.rfind(" ", pos + length, end)
        if space != -1 and space > start:
            end = space
    window = clean[start:end].strip()
    if max_chars <= 2:
        return window[:max_chars]
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS if end < len(clean) else ""
    return f"{prefix}{window}{suffix}"


def content_text(texts: AbcMapping[str, str], mapping: Mapping) -> str:
    """Join the mapping's content fields present in ``texts`` (already masked), in order."""
    return " ".join(texts[name] for name in mapping.content_fields if texts.get(name))
