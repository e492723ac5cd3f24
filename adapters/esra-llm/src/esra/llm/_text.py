"""Words, a light English stemmer and stopwords, shared by every LocalModel task.

Everything here is pure and deterministic: the same text always yields the same tokens in the
same order, so the same prompt always yields the same answer.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "MAX_TERM_CHARS",
    "RECENCY_WORDS",
    "STOPWORDS",
    "content_words",
    "identifier_like",
    "marked_terms",
    "quoted_phrases",
    "root",
    "sanitize",
    "search_words",
    "stem",
    "stems",
    "tokens",
    "uppercase_tokens",
]

# Terms are single words; anything longer than this is not a word a search index would hold.
MAX_TERM_CHARS = 64

_WORD = re.compile(r"[^\W_]+")
# What a fragment of a longer text begins or ends with (the core's fragments): see ``tokens``.
_ELLIPSIS = "\u2026"
# Per byte: ASCII letters and digits (``_WORD``'s characters in ASCII) as they are, every other
# byte a space.
_ASCII_WORD_BYTES = bytes(b if chr(b).isascii() and chr(b).isalnum() else 0x20 for b in range(256))
_QUOTED = re.compile(r"\"([^\"]{1,200})\"|“([^”]{1,200})”|«([^»]{1,200})»")
# Sequences a planner must never emit (the validator rejects them as UNSAFE_CONTENT).
_UNSAFE = ("--", "/*", "*/", ";", "#")

# Function words and question boilerplate ("what methods exist", "has anyone made"), the
# SMART list's kind; never subject words like "information" or "data", which whole
# collections are about. A word block reads better than 150 quoted strings one per line.
STOPWORDS = frozenset(
    """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either else ever
    every few for from further get gets give had has have having he her here hers him his how
    i if in into is it its itself just let like me might more most my myself no nor not now of
    off on once only or other our ours out over own per please same she should show so some
    such tell than that the their them then there these they this those through to too under
    until up us very via was we were what when where which while who whom why will with within
    without would you your yours find search list look looking need needs want wants know
    anything something everything thing things stuff regarding related relating much many
    against done may must shall upon yet anyone available exist existing given made make
    obtained one
    """.split()  # noqa: SIM905
)

RECENCY_WORDS = frozenset({"latest", "recent", "recently", "newest"})

_DOUBLE_KEEP = frozenset("lsz")


def tokens(text: str) -> list[str]:
    """Return the casefolded words of ``text`` in order (letters and digits only)."""
    # The ellipsis ESRA puts around a fragment is no word character: a space in its place
    # ends a word where it did, and leaves ASCII text ASCII.
    plain = text.replace(_ELLIPSIS, " ")
    if plain.isascii():
        # ASCII casefolds as it lowers, letter for letter, and its word characters other than
        # "_" are its letters and digits: every other byte becomes a space and the words are
        # what lies between spaces, found in C a few times faster than by the expression.
        lowered = plain.lower().encode("ascii").translate(_ASCII_WORD_BYTES)
        words = lowered.decode("ascii").split()
        if max(map(len, words), default=0) <= MAX_TERM_CHARS:
            return words  # nothing to cut: spares slicing every word
        return [w[:MAX_TERM_CHARS] for w in words]
    return [w.casefold()[:MAX_TERM_CHARS] for w in _WORD.findall(text)]


def _undouble(word: str) -> str:
    # "planned" -> "plann" -> "plan"; but "billed" -> "bill" keeps its double l.
    last = word[-1]
    doubled = len(word) > 2 and last == word[-2]
    if doubled and last not in _DOUBLE_KEEP and last.isalpha() and last not in "aeiou":
        return word[:-1]
    return word


def stem(word: str) -> str:
    """Strip plural, -ing and -ed endings (and a final e) so word forms meet.

    Deliberately light: both sides of every comparison go through the same function, so it
    only has to make forms of one word agree, not produce real roots.
    """
    w = word.casefold()
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith(("ies", "ied")) and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    elif w.endswith("ing") and len(w) > 5:
        w = _undouble(w[:-3])
    elif w.endswith("ed") and len(w) > 4:
        w = _undouble(w[:-2])
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


_VOWELS = frozenset("aeiou")


def _consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    # m in [C](VC){m}[V]: the number of vowel-consonant sequences.
    count = 0
    previous_vowel = False
    for i in range(len(stem)):
        vowel = not _consonant(stem, i)
        if previous_vowel and not vowel:
            count += 1
        previous_vowel = vowel
    return count


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    # consonant-vowel-consonant, the last not w, x or y ("hop", not "snow").
    n = len(word)
    return (
        n >= 3
        and _consonant(word, n - 3)
        and not _consonant(word, n - 2)
        and _consonant(word, n - 1)
        and word[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("abli", "able"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
)
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


def _replace(word: str, rules: tuple[tuple[str, str], ...], min_measure: int) -> str:
    for suffix, replacement in rules:
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + replacement if _measure(stem) > min_measure else word
    return word


def root(word: str) -> str:
    """Return the Porter (1980) stem of a casefolded word: a stronger conflation than ``stem``.

    The original algorithm, rule for rule ("similarity" and "similar" both become "similar",
    "conditions" and "conditional" both "condit"); words of one or two letters are kept. Used
    where recall of word forms matters more than readable stems (the rerank's lexical score).
    """
    w = word
    if len(w) <= 2:
        return w
    # Step 1a: plurals.
    if w.endswith(("sses", "ies")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # Step 1b: -eed, -ed, -ing.
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_consonant(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    # Step 1c: y -> i after a vowel somewhere in the stem.
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    # Step 4: drop a suffix when the rest has m > 1 (-ion only after s or t).
    for suffix in _STEP4:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
                w = stem
            break
    # Step 5a / 5b: a final e, a final double l.
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            w = stem
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


def _is_content(word: str) -> bool:
    if word in STOPWORDS or word in RECENCY_WORDS:
        return False
    return len(word) >= 2 or word.isdigit()


def content_words(text: str) -> list[str]:
    """Return the content words of ``text``: no stopwords, one surface form per stem, in order."""
    seen: set[str] = set()
    words: list[str] = []
    for word in tokens(text):
        key = stem(word)
        if _is_content(word) and key not in seen:
            seen.add(key)
            words.append(word)
    return words


def search_words(text: str) -> list[str]:
    """Return every distinct content word of ``text`` as written (casefolded), in order.

    Unlike ``content_words`` no two forms of one stem are merged: an engine that does not
    stem finds "layers" only when asked for "layers", whatever it finds for "layer".
    """
    return list(dict.fromkeys(w for w in tokens(text) if _is_content(w)))


def stems(words: Iterable[str]) -> list[str]:
    """Return the stems of ``words``, deduplicated, in order."""
    return list(dict.fromkeys(stem(w) for w in words))


def identifier_like(word: str) -> bool:
    """Return whether ``word`` looks like a code a user means exactly (``x1``, ``2041``)."""
    has_digit = any(c.isdigit() for c in word)
    return has_digit and (len(word) >= 3 or any(c.isalpha() for c in word))


def uppercase_tokens(text: str) -> list[str]:
    """Return words written in capitals (2-6 letters) in ``text``, casefolded, in order.

    Capitals single a word out only beside lower case: a request written all in capitals (a
    shouted question, a terminal that types them) marks none of its words.
    """
    words = [w for w in _WORD.findall(text) if w.isalpha()]
    shouted = sum(w.isupper() for w in words)
    if shouted * 2 > len(words):
        return []
    found = [w for w in words if 2 <= len(w) <= 6 and w.isupper()]
    return list(dict.fromkeys(w.casefold() for w in found))


# "+word", and "must include word" (or contain, mention, have, match): the caller's explicit
# ways of saying that a word has to be there.
_MARKED = re.compile(
    r"(?:(?<![\w+])\+|\bmust\s+(?:include|contain|mention|have|match)\s+)([^\W_]+)",
    re.IGNORECASE,
)


def marked_terms(text: str) -> list[str]:
    """Return the words ``text`` explicitly requires (``+word``, "must include word"), in order.

    Quoted text is reported by ``quoted_phrases``; nothing is inferred from capitals, digits
    or position, which say how a word is written, not that a result must contain it.
    """
    found = [match.group(1).casefold()[:MAX_TERM_CHARS] for match in _MARKED.finditer(text)]
    return list(dict.fromkeys(w for w in found if _is_content(w)))


def quoted_phrases(text: str) -> list[str]:
    """Return the normalized contents of double-quoted spans, in order, deduplicated."""
    found: list[str] = []
    for match in _QUOTED.finditer(text):
        inner = next(g for g in match.groups() if g is not None)
        words = tokens(inner)
        if words:
            found.append(" ".join(words))
    return list(dict.fromkeys(found))


def sanitize(term: str) -> str:
    """Remove statement separators, comment sequences and control characters from ``term``.

    Repeats until stable, so removing one sequence can never assemble another (``-/*-``).
    """
    if term.isprintable():
        # No printable character is in a C category (control, format, surrogate, private
        # use, unassigned): the common case needs no per-character look-up.
        current = term
    else:
        current = "".join(c for c in term if not unicodedata.category(c).startswith("C"))
    previous = None
    while previous != current:
        previous = current
        for sequence in _UNSAFE:
            current = current.replace(sequence, " ")
    return " ".join(current.split())[:MAX_TERM_CHARS]
