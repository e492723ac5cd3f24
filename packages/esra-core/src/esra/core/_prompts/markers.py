"""Structural markers around untrusted content, and the stripping that keeps them unforgeable."""

from __future__ import annotations

import json
import re
from typing import Any

from esra.core._text_normalisation import INVISIBLE, FoldedText

__all__ = [
    "MARKER_TOKEN",
    "begin_marker",
    "end_marker",
    "strip_markers",
    "strip_untrusted",
    "untrusted_json",
    "wrap_untrusted",
]

MARKER_TOKEN = "ESRA-DATA"
_ELLIPSIS = "\u2026"
# The token as it can be disguised, matched in folded text (see esra.core._text_normalisation):
# any dash or underscore between the words, or none, with or without the END prefix; and with
# spaces too when it directly follows "<<", where it can only be read as a boundary. Spaced
# words elsewhere ("ESRA data sources") are ordinary prose and stay.
_TOKEN = re.compile(
    r"(?i)(?<=<<)\s*(?:end[\s_-]*)?esra[\s_-]*data|(?:end[_-]*)?esra[_-]*data",
)


def begin_marker(tag: str) -> str:
    """Return the marker that opens the untrusted item ``tag``."""
    return f"<<{MARKER_TOKEN} id={tag}>>"


def end_marker(tag: str) -> str:
    """Return the marker that closes the untrusted item ``tag``."""
    return f"<<END-{MARKER_TOKEN} id={tag}>>"


# JSON shows U+000E and U+001E as the escapes \u000e and \u001e, whose last letter reads on
# into the text after it ("\x1eSRA-DATA" is shown as "\u001eSRA-DATA"). Matching sees each as
# the "e" it ends in; no other character JSON escapes ends in a letter a token can start with.
_SHOWN_AS_E = str.maketrans({"\x0e": "e", "\x1e": "e"})


def strip_markers(text: str) -> str:
    """Remove every occurrence of the marker token, however disguised, so content cannot forge
    a boundary.

    Invisible characters (Default_Ignorable_Code_Point) are removed everywhere: they render as
    nothing, and a model reads them as text. The token is then looked for in the folded text
    (NFKC-style decomposition, marks dropped, look-alike letters and dashes folded), so
    ``ＥＳＲＡ-ＤＡＴＡ``, ``ЕSRA‑DATA`` or ``ESRA\u034f–DATA`` are removed like
    ``ESRA-DATA``; the original characters of each match are cut, everything else is kept as
    it was. Repeats until nothing changes, so removing one occurrence can never assemble
    another (``esra-esra-datadata`` → ``esra-data`` → ``""``): afterwards no part of the
    result folds to the token, nor of its JSON text (U+000E and U+001E, which JSON shows as
    escapes ending in ``e``, are matched as that ``e``).
    """
    if "\x0e" in text or "\x1e" in text:
        return _strip_folded(text)
    if text.isascii() or text.replace(_ELLIPSIS, "").isascii():
        # The common case stays cheap: ASCII holds no invisible or look-alike character, and
        # without "esra" in it no token can be there at all. The ellipsis ESRA puts around a
        # fragment is no obstacle: it folds to dots, which the token never holds, so the
        # token matches around it in the text exactly as in the folded text.
        if "esra" not in text.lower():
            return text
        previous = None
        current = text
        while previous != current:
            previous = current
            current = _TOKEN.sub("", current)
        return current
    return _strip_folded(text)


def _strip_folded(text: str) -> str:
    """``strip_markers`` for any text: the token looked for in the folded text."""
    current = INVISIBLE.sub("", text)
    while True:
        # The translation keeps every index: both characters it replaces are one ASCII letter.
        folded = FoldedText(current.translate(_SHOWN_AS_E))
        kept: list[str] = []
        last = 0
        for match in _TOKEN.finditer(folded.folded):
            start, end = folded.original_span(match.start(), match.end())
            kept.append(current[last:start])
            last = max(last, end)
        if not kept:
            return current
        kept.append(current[last:])
        current = "".join(kept)


def _strip_all(value: Any) -> Any:
    if isinstance(value, str):
        return strip_markers(value)
    if isinstance(value, dict):
        return {strip_markers(str(k)): _strip_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strip_all(v) for v in value]
    return value


def wrap_untrusted(tag: str, payload: Any) -> tuple[str, str]:
    """Serialize ``payload`` as JSON with every string stripped of markers.

    Returns the tag (also stripped, so a tag can never close another item) and the JSON text.
    """
    safe_tag, value = strip_untrusted(tag, payload)
    return safe_tag, untrusted_json(value)


def untrusted_json(value: Any) -> str:
    """The JSON text of a reference item's value, the one form every prompt shows: sorted
    keys, non-ASCII characters kept."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def strip_untrusted(tag: str, payload: Any) -> tuple[str, Any]:
    """The tag and the value ``wrap_untrusted`` serializes, for a reader that may never need
    the text.

    The value equals what ``json.loads`` of that text gives (dicts, lists and scalars, every
    string stripped of markers; tuples become lists, keys strings). It is the text's source,
    not a copy: whoever holds it must not change it.
    """
    # Stripped again after the cut: dropping characters can join a token's parts.
    safe_tag = strip_markers(re.sub(r"[^A-Za-z0-9_.:-]", "", strip_markers(tag)))
    return safe_tag, _strip_all(payload)
