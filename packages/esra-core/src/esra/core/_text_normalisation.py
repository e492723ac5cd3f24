"""Text folding for matching: the skeleton a pattern sees, never the text that is stored.

Attackers hide an instruction or a forged marker from a pattern with characters a reader (or a
model) does not notice: zero-width and tag characters between letters, fullwidth or
mathematical letters, Cyrillic and Greek letters that look Latin, dashes that look like a
hyphen. :func:`fold` maps every character to what it looks like, so a pattern written for plain
ASCII matches the disguised text too. The rule, one character at a time:

1. a Default_Ignorable_Code_Point (Unicode DerivedCoreProperties: zero-width characters, the
   soft hyphen, U+034F, U+180B–U+180F, bidirectional controls, variation selectors, Hangul
   fillers, tag characters U+E0000–U+E0FFF) folds to nothing;
2. otherwise the character is decomposed with NFKD (fullwidth, mathematical, circled and
   superscript letters, ligatures and compatibility spaces become their plain forms) and its
   combining marks (categories Mn, Me) are dropped, so accents and stacked marks hide nothing;
3. each remaining character that is dash punctuation (category Pd) folds to ``-``, and each
   one listed in :data:`_LOOKALIKES` folds to the ASCII letter it imitates.

Before rule 2, two kinds of character are read for what they are rather than decomposed:

- a letter of a styled alphabet that NFKD leaves alone or spells with punctuation (small
  capitals, negative circled and squared capitals, regional indicator letters, parenthesized
  letters — what "fancy text" generators offer) folds to its plain letter;
- a Unicode line break folds to a line feed (U+0085 next line, U+2028 line separator) or, for
  U+2029 paragraph separator, to two (a blank line), so patterns that read lines see them.

:data:`_LOOKALIKES` is the part of Unicode's confusables.txt (UTS #39, as packaged in
confusable-homoglyphs 3.3.1, January 2024) that maps a single non-ASCII letter, or a minus-like
sign, to a single ASCII letter or ``-``, less the entries rule 2 already covers. One change to
the data: confusables.txt spells the skeleton of a capital I as ``l``, so a capital letter whose
prototype is ``l`` (Greek Iota, Cyrillic І and Ӏ) folds to ``i`` here, which is the letter it
imitates. ASCII is never folded (matching is case-insensitive already, and folding ``I`` to
``l`` as the skeleton does would break every English pattern).

Folding is per character, so ``fold(a + b) == fold(a) + fold(b)`` and a position in the folded
text maps back to exactly one position in the original (:class:`FoldedText`).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right

__all__ = ["INVISIBLE", "FoldedText", "fold", "fold_char"]

# Unicode 15 Default_Ignorable_Code_Point, including its unassigned ranges (new characters
# there would be invisible too).
_DEFAULT_IGNORABLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
INVISIBLE = re.compile(f"[{_DEFAULT_IGNORABLE}]")
"""Every Default_Ignorable_Code_Point: what renders as nothing in any conforming text engine."""

# Target ASCII letter (or "-") -> the non-ASCII characters that imitate it (see the docstring).
_LOOKALIKES: dict[str, str] = {
    "-": "\u02d7\u2043\u2212\u2796\u2cba",
    "a": "\u0251\u0391\u03b1\u0410\u0430\u13aa\u15c5\ua4ee\U000102a0\U00016f40",
    "b": (
        "\u0184\u0392\u0412\u042c\u13cf\u13f4\u1472\u15af\u15f7\ua4d0\ua7b4\U00010282"
        "\U000102a1\U00010301"
    ),
    "c": (
        "\u03f2\u03f9\u0421\u0441\u13df\u1d04\u2ca4\u2ca5\ua4da\uabaf\U000102a2\U00010302"
        "\U00010415\U0001043d\U0001051c"
    ),
    "d": "\u0501\u13a0\u13e7\u146f\u15de\u15ea\ua4d2\ua4d3",
    "e": "\u0395\u0415\u0435\u04bd\u13ac\u2d39\ua4f0\uab32\U00010286\U000118a6\U000118ae",
    "f": (
        "\u017f\u03dc\u0584\u15b4\u1e9d\ua4dd\ua798\ua799\uab35\U00010287\U000102a5"
        "\U00010525\U000118a2\U000118c2"
    ),
    "g": "\u018d\u0261\u050c\u0581\u13c0\u13f3\u1d83\ua4d6",
    "h": "\u0397\u041d\u04bb\u0570\u13bb\u13c2\u157c\u2c8e\ua4e7\U000102cf",
    "i": (
        "\u0131\u0196\u0269\u026a\u037a\u0399\u03b9\u0406\u0456\u04c0\u04cf\u13a5\u2c92"
        "\ua647\uab75\U000118c3"
    ),
    "j": "\u037f\u03f3\u0408\u0458\u13ab\u148d\ua4d9\ua7b2",
    "k": "\u039a\u041a\u13e6\u16d5\u2c94\ua4d7\U00010518",
    "l": (
        "\u01c0\u13de\u14aa\u16c1\u2cd0\u2d4f\ua4e1\ua4f2\U0001028a\U00010309\U0001041b"
        "\U00010526\U000118a3\U000118b2\U00016f16\U00016f28"
    ),
    "m": "\u039c\u03fa\u041c\u13b7\u15f0\u16d6\u2c98\ua4df\U000102b0\U00010311",
    "n": "\u039d\u0578\u057c\u2c9a\ua4e0\U00010513",
    "o": (
        "\u039f\u03bf\u03c3\u041e\u043e\u0555\u0585\u0b20\u0d20\u101d\u10ff\u12d0\u1d0f"
        "\u1d11\u2c9e\u2c9f\u2d54\ua4f3\uab3d\U00010292\U000102ab\U00010404\U0001042c"
        "\U000104c2\U000104ea\U00010516\U000118b5\U000118c8\U000118d7"
    ),
    "p": "\u03a1\u03c1\u0420\u0440\u13e2\u146d\u2ca2\u2ca3\ua4d1\U00010295",
    "q": "\u051b\u0563\u0566\u2d55",
    "r": ("\u01a6\u0433\u13a1\u13d2\u1587\u1d26\u2c85\ua4e3\uab47\uab48\uab81\U000104b4\U00016f35"),
    "s": (
        "\u01bd\u0405\u0455\u054f\u13d5\u13da\ua4e2\ua731\uabaa\U00010296\U00010420"
        "\U00010448\U000118c1\U00016f3a"
    ),
    "t": "\u03a4\u0422\u13a2\u2ca6\ua4d4\U00010297\U000102b1\U00010315\U000118bc\U00016f0a",
    "u": (
        "\u028b\u03c5\u054d\u057d\u1200\u144c\u1d1c\ua4f4\ua79f\uab4e\uab52\U000104ce"
        "\U000104f6\U000118b8\U000118d8\U00016f42"
    ),
    "v": (
        "\u03bd\u0474\u0475\u13d9\u142f\u1d20\u2d38\ua4e6\ua6df\uaba9\U0001051d\U00011706"
        "\U000118a0\U000118c0\U00016f08"
    ),
    "w": (
        "\u026f\u0461\u051c\u051d\u0561\u13b3\u13d4\u1d21\ua4ea\uab83\U0001170a\U0001170e\U0001170f"
    ),
    "x": (
        "\u03a7\u0425\u0445\u1541\u157d\u16b7\u2cac\u2d5d\ua4eb\ua7b3\U00010290\U000102b4"
        "\U00010317\U00010527"
    ),
    "y": (
        "\u0263\u028f\u03a5\u03b3\u0423\u0443\u04ae\u04af\u10e7\u13a9\u13bd\u1d8c\u1eff"
        "\u2ca8\ua4ec\uab5a\U000102b2\U000118a4\U000118dc\U00016f43"
    ),
    "z": "\u0396\u13c3\u1d22\ua4dc\uab93\U000118a9\U000118c4",
}
_CONFUSABLE = {source: target for target, sources in _LOOKALIKES.items() for source in sources}
# Styled letters (see the docstring): small capitals confusables.txt does not list, and the
# first code point of each styled alphabet that runs from A to Z.
_SMALL_CAPITALS = {
    "\u1d00": "a",
    "\u0299": "b",
    "\u1d05": "d",
    "\u1d07": "e",
    "\ua730": "f",
    "\u0262": "g",
    "\u029c": "h",
    "\u1d0a": "j",
    "\u1d0b": "k",
    "\u029f": "l",
    "\u1d0d": "m",
    "\u0274": "n",
    "\u1d18": "p",
    "\ua7af": "q",
    "\u0280": "r",
    "\u1d1b": "t",
}
_STYLED_ALPHABETS = (
    0x1F150,  # negative circled capitals
    0x1F170,  # negative squared capitals
    0x1F1E6,  # regional indicator symbols
    0x249C,  # parenthesized small letters
)
_READ_AS = _SMALL_CAPITALS | {
    chr(first + offset): chr(ord("a") + offset)
    for first in _STYLED_ALPHABETS
    for offset in range(26)
}
# Unicode line breaks (see the docstring): what reads lines sees them as line breaks.
_READ_AS |= {"\x85": "\n", "\u2028": "\n", "\u2029": "\n\n"}
_MARKS = frozenset({"Mn", "Me"})
# Distinct characters remembered by the translation table; beyond this a character is folded
# on every sight, so a text of every code point cannot grow the cache without bound.
_CACHE_LIMIT = 65536
_BLOCK = 1024


def fold_char(char: str) -> str:
    """Return what ``char`` looks like for matching: ``""``, itself, or plain letters."""
    if char.isascii():
        return char
    if INVISIBLE.match(char):
        return ""
    if char in _READ_AS:
        return _READ_AS[char]
    parts: list[str] = []
    for part in unicodedata.normalize("NFKD", char):
        if unicodedata.category(part) in _MARKS or INVISIBLE.match(part):
            continue
        if unicodedata.category(part) == "Pd":
            parts.append("-")
        else:
            parts.append(_CONFUSABLE.get(part, part))
    return "".join(parts)


class _FoldTable(dict[int, str]):
    """A ``str.translate`` table that folds each character the first time it is seen."""

    def __missing__(self, code: int) -> str:
        folded = fold_char(chr(code))
        if len(self) < _CACHE_LIMIT:
            self[code] = folded
        return folded


_TABLE = _FoldTable({code: chr(code) for code in range(128)})


def fold(text: str) -> str:
    """Return the folded form of ``text`` (ASCII text is returned as it is)."""
    if text.isascii():
        return text
    return text.translate(_TABLE)


class FoldedText:
    """``text`` folded, with the way back from a folded span to the original one.

    The map back is built only when first asked for, as the folded length of each block of
    1,024 original characters, so a long text costs one extra list of small integers and
    never a per-character index.
    """

    def __init__(self, text: str) -> None:
        self.original = text
        self.folded = fold(text)
        self._identity = self.folded is text
        self._starts: list[int] | None = None

    def _block_starts(self) -> list[int]:
        if self._starts is None:
            starts = [0]
            for lo in range(0, len(self.original), _BLOCK):
                starts.append(starts[-1] + len(fold(self.original[lo : lo + _BLOCK])))
            self._starts = starts
        return self._starts

    def original_index(self, position: int) -> int:
        """Return the index of the original character that produced folded ``position``."""
        if self._identity:
            return position
        starts = self._block_starts()
        block = min(bisect_right(starts, position) - 1, len(starts) - 2)
        reached = starts[block]
        index = block * _BLOCK
        while index < len(self.original):
            reached += len(fold_char(self.original[index]))
            if reached > position:
                return index
            index += 1
        return len(self.original)

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """Return the original ``(start, end)`` of the folded span ``[start, end)``."""
        if self._identity:
            return start, end
        first = self.original_index(start)
        if end <= start:
            return first, first
        return first, self.original_index(end - 1) + 1
