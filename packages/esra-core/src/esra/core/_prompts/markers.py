"""Structural markers around untrusted content, and the stripping that keeps them unforgeable."""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from esra.core._text_normalisation import INVISIBLE, FoldedText, fold_char

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
        current = _TOKEN.sub("", text)
        if current == text:
            return text
        # Removing tokens can join others ("ESRA-ESRA-…DATADATA", nested as deep as a record
        # is long): one pass that removes those as they form, then passes until nothing
        # changes, which find nothing more unless that pass missed something.
        current = _unnest(current, _as_is)
        previous = None
        while previous != current:
            previous = current
            current = _TOKEN.sub("", current)
        return current
    return _strip_folded(text)


def _strip_folded(text: str) -> str:
    """``strip_markers`` for any text: the token looked for in the folded text."""
    current = INVISIBLE.sub("", text)
    stripped = _cut_folded(current)
    if stripped is None:
        return current
    # As in strip_markers: the tokens that removing others forms go in one more pass.
    current = _unnest(stripped, _folded_char)
    while (stripped := _cut_folded(current)) is not None:
        current = stripped
    return current


def _cut_folded(current: str) -> str | None:
    """``current`` without the tokens found in its folded text, or ``None`` if none was."""
    # The translation keeps every index: both characters it replaces are one ASCII letter.
    folded = FoldedText(current.translate(_SHOWN_AS_E))
    kept: list[str] = []
    last = 0
    for match in _TOKEN.finditer(folded.folded):
        start, end = folded.original_span(match.start(), match.end())
        kept.append(current[last:start])
        last = max(last, end)
    if not kept:
        return None
    kept.append(current[last:])
    return "".join(kept)


def _as_is(char: str) -> str:
    return char


def _folded_char(char: str) -> str:
    return fold_char(char.translate(_SHOWN_AS_E))


# The letters of the token as _TOKEN's case-insensitive matching reads them (re matches the
# long s, U+017F, for "s").
_CASELESS = {letter: frozenset({letter, letter.upper()}) for letter in "endsrat"}
_CASELESS["s"] = frozenset({"s", "S", "\u017f"})
_DASHES = frozenset("_-")


def _unnest(text: str, folds: Callable[[str], str]) -> str:
    """Remove every token from ``text`` in one left-to-right pass, the ones that removing
    others forms included, in time linear in its length.

    Characters are kept on a stack with what they fold to (``folds``); whenever the folded
    stack ends with a token (as _TOKEN reads it), the original characters it came from are
    popped. What is left then ends with no token, and pushing more can only form one that
    ends with what is pushed, which is looked for then. The runs of separators ending at
    each folded character are kept alongside, so looking costs the same however long a run
    of dashes or spaces a record holds.
    """
    kept: list[str] = []
    flat: list[str] = []
    owner: list[int] = []
    dashes: list[int] = []
    spaces: list[int] = []
    blanks: list[int] = []
    for char in text:
        kept.append(char)
        index = len(kept) - 1
        for part in folds(char):
            at = len(flat) - 1
            is_dash, is_space = part in _DASHES, part.isspace()
            dashes.append(dashes[at] + 1 if is_dash and at >= 0 else int(is_dash))
            spaces.append(spaces[at] + 1 if is_space and at >= 0 else int(is_space))
            blank = is_dash or is_space
            blanks.append(blanks[at] + 1 if blank and at >= 0 else int(blank))
            flat.append(part)
            owner.append(index)
            start = _token_start(flat, dashes, spaces, blanks)
            if start is not None:
                cut = owner[start]
                first = bisect_left(owner, cut)
                del kept[cut:], flat[first:], owner[first:]
                del dashes[first:], spaces[first:], blanks[first:]
                break
    return "".join(kept)


def _ends_with(flat: list[str], end: int, word: str) -> bool:
    """Whether ``word`` (case-insensitively) ends at index ``end`` of ``flat``."""
    first = end - len(word) + 1
    return first >= 0 and all(flat[first + n] in _CASELESS[letter] for n, letter in enumerate(word))


def _before(runs: list[int], index: int) -> int:
    """The index just before the run ``runs`` counts that ends right before ``index``."""
    return index - 1 - (runs[index - 1] if index > 0 else 0)


def _token_start(
    flat: list[str], dashes: list[int], spaces: list[int], blanks: list[int]
) -> int | None:
    """Where the token ending at the last folded character starts, or ``None``."""
    last = len(flat) - 1
    if not _ends_with(flat, last, "data"):
        return None
    data = last - 3
    found: int | None = None
    # (?:end[_-]*)?esra[_-]*data
    esra = _before(dashes, data)
    if _ends_with(flat, esra, "esra"):
        found = esra - 3
        end = _before(dashes, found)
        if _ends_with(flat, end, "end"):
            found = end - 2
    # (?<=<<)\s*(?:end[\s_-]*)?esra[\s_-]*data
    esra = _before(blanks, data)
    if _ends_with(flat, esra, "esra"):
        begins = [esra - 3]
        end = _before(blanks, esra - 3)
        if _ends_with(flat, end, "end"):
            begins.insert(0, end - 2)
        for begin in begins:
            opening = _before(spaces, begin)
            if opening >= 1 and flat[opening] == flat[opening - 1] == "<":
                found = opening + 1 if found is None else min(found, opening + 1)
                break
    return found


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
