"""The order in which a line of text displays: the Unicode Bidirectional Algorithm, reduced.

Bidirectional controls change the order a line is displayed in without changing the stored
order: a right-to-left override (U+202E) shows "snoitcurtsni" as "instructions", words in
left-to-right isolates inside a right-to-left one show in reverse order, and so do words
separated by right-to-left marks in a line that a mark makes right-to-left. The scanner reads
such a line in its display order too (:func:`display_order`).

The algorithm is UAX #9 (Unicode 15) for one paragraph, with its rules P2–P3 (the paragraph's
direction from its first strong character, isolates skipped), X1–X10 (explicit embeddings,
overrides and isolates, at most 125 deep, with the overflow counters; isolating run
sequences), W1–W7 (weak types), N1–N2 (neutrals), I1–I2 (implicit levels), L1 (trailing
whitespace and segment separators at the paragraph's level) and L2 (reversal). Left out: N0
(paired brackets take the direction of what they enclose), which moves only brackets, and
line wrapping, since each line of extracted text is laid out alone. Characters the rules
remove (X9: the embedding and override controls and boundary neutrals such as zero-width
spaces) display as nothing, so they are not in the order at all.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["BIDI_CONTROL", "PARAGRAPH_BREAK", "display_order"]

BIDI_CONTROL = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""The bidirectional formatting characters and marks (ALM, LRM, RLM, embeddings, overrides,
PDF, isolates, PDI)."""

PARAGRAPH_BREAK = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
"""What ends the line a bidirectional control acts on: a paragraph separator (UAX #9 class B),
or a line break (vertical tab, form feed, U+2028), after which a line is laid out anew."""

_MAX_DEPTH = 125
_ISOLATE_INITIATORS = frozenset({"LRI", "RLI", "FSI"})
_ISOLATES = _ISOLATE_INITIATORS | {"PDI"}
_REMOVED = frozenset({"RLE", "LRE", "RLO", "LRO", "PDF", "BN"})
_NEUTRALS = frozenset({"B", "S", "WS", "ON"}) | _ISOLATES
_TRAILING = frozenset({"WS"}) | _ISOLATES | _REMOVED


@lru_cache(maxsize=4096)
def _bidi_class(char: str) -> str:
    # An unassigned code point has no class here; the default for most of them is L.
    return unicodedata.bidirectional(char) or "L"


def _first_strong(classes: list[str], start: int, end: int, matches: dict[int, int]) -> str:
    """``"R"`` if the first strong character in ``[start, end)`` is right-to-left, else ``"L"``.

    Text inside an isolate is skipped (P2), up to its matching PDI or ``end``.
    """
    index = start
    while index < end:
        kind = classes[index]
        if kind == "L":
            return "L"
        if kind in ("R", "AL"):
            return "R"
        if kind in _ISOLATE_INITIATORS:
            index = matches.get(index, end)
        index += 1
    return "L"


def _isolate_matches(classes: list[str]) -> dict[int, int]:
    """Each isolate initiator's matching PDI (BD9)."""
    matches: dict[int, int] = {}
    opened: list[int] = []
    for index, kind in enumerate(classes):
        if kind in _ISOLATE_INITIATORS:
            opened.append(index)
        elif kind == "PDI" and opened:
            matches[opened.pop()] = index
    return matches


def _explicit_levels(
    classes: list[str], matches: dict[int, int], paragraph: int
) -> tuple[list[int], list[str]]:
    """Each character's embedding level and its type after overrides (X1–X8)."""
    levels = [paragraph] * len(classes)
    types = list(classes)
    # (level, override ("L", "R" or ""), whether an isolate opened it)
    stack: list[tuple[int, str, bool]] = [(paragraph, "", False)]
    overflow_isolates = overflow_embeddings = valid_isolates = 0
    for index, kind in enumerate(classes):
        level, override, _ = stack[-1]
        levels[index] = level
        if kind in ("RLE", "LRE", "RLO", "LRO"):
            new = (level + 1) | 1 if kind[0] == "R" else (level + 2) & ~1
            if new <= _MAX_DEPTH and overflow_isolates == overflow_embeddings == 0:
                stack.append((new, kind[0] if kind[2] == "O" else "", False))
            elif overflow_isolates == 0:
                overflow_embeddings += 1
        elif kind in _ISOLATE_INITIATORS:
            if override:
                types[index] = override
            rtl = kind == "RLI" or (
                kind == "FSI"
                and _first_strong(classes, index + 1, matches.get(index, len(classes)), matches)
                == "R"
            )
            new = (level + 1) | 1 if rtl else (level + 2) & ~1
            if new <= _MAX_DEPTH and overflow_isolates == overflow_embeddings == 0:
                valid_isolates += 1
                stack.append((new, "", True))
            else:
                overflow_isolates += 1
        elif kind == "PDI":
            if overflow_isolates:
                overflow_isolates -= 1
            elif valid_isolates:
                overflow_embeddings = 0
                while not stack[-1][2]:
                    stack.pop()
                stack.pop()
                valid_isolates -= 1
            level, override, _ = stack[-1]
            levels[index] = level
            if override:
                types[index] = override
        elif kind == "PDF":
            if overflow_isolates:
                pass
            elif overflow_embeddings:
                overflow_embeddings -= 1
            elif not stack[-1][2] and len(stack) > 1:
                stack.pop()
        elif kind not in _REMOVED and override:
            types[index] = override
    return levels, types


def _run_sequences(
    visible: list[int], levels: list[int], classes: list[str], matches: dict[int, int]
) -> list[list[int]]:
    """The isolating run sequences (BD13): level runs, joined across each isolate."""
    runs: list[list[int]] = []
    for index in visible:
        if runs and levels[runs[-1][-1]] == levels[index]:
            runs[-1].append(index)
        else:
            runs.append([index])
    run_starting_at = {run[0]: number for number, run in enumerate(runs)}
    continued: set[int] = set()
    sequences: list[list[int]] = []
    for number, run in enumerate(runs):
        if number in continued:
            continue
        sequence = list(run)
        while classes[sequence[-1]] in _ISOLATE_INITIATORS:
            following = run_starting_at.get(matches.get(sequence[-1], -1), -1)
            if following < 0:
                break
            continued.add(following)
            sequence.extend(runs[following])
        sequences.append(sequence)
    return sequences


def _resolve(types: list[str], level: int, sos: str, eos: str) -> list[str]:
    """The types of one isolating run sequence after W1–W7 and N1–N2: L, R, EN or AN."""
    kinds = list(types)
    previous = sos
    for position, kind in enumerate(kinds):  # W1
        if kind == "NSM":
            kinds[position] = "ON" if previous in _ISOLATES else previous
        previous = kinds[position]
    strong = sos
    for position, kind in enumerate(kinds):  # W2, W3
        if kind in ("L", "R", "AL"):
            strong = kind
        elif kind == "EN" and strong == "AL":
            kinds[position] = "AN"
    kinds = ["R" if kind == "AL" else kind for kind in kinds]
    for position in range(1, len(kinds) - 1):  # W4
        before, after = kinds[position - 1], kinds[position + 1]
        if before == after and (
            (kinds[position] == "ES" and before == "EN")
            or (kinds[position] == "CS" and before in ("EN", "AN"))
        ):
            kinds[position] = before
    for position, kind in enumerate(kinds):  # W5
        if kind == "EN":
            for step in (-1, 1):
                near = position + step
                while 0 <= near < len(kinds) and kinds[near] == "ET":
                    kinds[near] = "EN"
                    near += step
    kinds = ["ON" if kind in ("ES", "ET", "CS") else kind for kind in kinds]  # W6
    strong = sos
    for position, kind in enumerate(kinds):  # W7
        if kind in ("L", "R"):
            strong = kind
        elif kind == "EN" and strong == "L":
            kinds[position] = "L"
    embedding = "R" if level % 2 else "L"
    position = 0
    while position < len(kinds):  # N1, N2
        if kinds[position] not in _NEUTRALS:
            position += 1
            continue
        end = position
        while end < len(kinds) and kinds[end] in _NEUTRALS:
            end += 1
        before = sos if position == 0 else ("L" if kinds[position - 1] == "L" else "R")
        after = eos if end == len(kinds) else ("L" if kinds[end] == "L" else "R")
        kinds[position:end] = [before if before == after else embedding] * (end - position)
        position = end
    return kinds


def _reorder(order: list[int], levels: list[int]) -> list[int]:
    """L2: from the highest level to the lowest odd one, reverse each run at that level or
    higher. A level no character has reverses the same runs as the one above it, so only
    an odd number of such steps in a row changes anything."""
    ranks = [levels[index] for index in order]
    odd = [rank for rank in ranks if rank % 2]
    if not odd:
        return order
    present = sorted(set(ranks), reverse=True)
    lowest = min(odd)
    for number, rank in enumerate(present):
        if rank < lowest:
            break
        floor = max(present[number + 1] if number + 1 < len(present) else 0, lowest - 1)
        if (rank - floor) % 2 == 0:
            continue
        position = 0
        while position < len(order):
            if ranks[position] < rank:
                position += 1
                continue
            end = position
            while end < len(order) and ranks[end] >= rank:
                end += 1
            order[position:end] = order[position:end][::-1]
            ranks[position:end] = ranks[position:end][::-1]
            position = end
    return order


def display_order(line: str) -> list[int]:
    """The positions of ``line``'s displayed characters, from left to right.

    ``line`` is one paragraph laid out as one line (it holds no :data:`PARAGRAPH_BREAK`).
    Characters that display as nothing (X9) are left out; every other position is there once.
    """
    classes = [_bidi_class(char) for char in line]
    matches = _isolate_matches(classes)
    paragraph = 1 if _first_strong(classes, 0, len(classes), matches) == "R" else 0
    levels, types = _explicit_levels(classes, matches, paragraph)
    visible = [index for index, kind in enumerate(classes) if kind not in _REMOVED]
    place = {index: position for position, index in enumerate(visible)}
    # sos and eos compare embedding levels, before I1–I2 raise any.
    embedding = list(levels)
    for sequence in _run_sequences(visible, levels, classes, matches):
        level = embedding[sequence[0]]
        first, last = place[sequence[0]], place[sequence[-1]]
        before = embedding[visible[first - 1]] if first > 0 else paragraph
        unmatched = classes[sequence[-1]] in _ISOLATE_INITIATORS
        after = (
            embedding[visible[last + 1]] if last + 1 < len(visible) and not unmatched else paragraph
        )
        sos = "R" if max(before, level) % 2 else "L"
        eos = "R" if max(after, level) % 2 else "L"
        resolved = _resolve([types[index] for index in sequence], level, sos, eos)
        for index, kind in zip(sequence, resolved, strict=True):  # I1, I2
            if level % 2 == 0 and kind != "L":
                levels[index] = level + (1 if kind == "R" else 2)
            elif level % 2 and kind != "R":
                levels[index] = level + 1
    trailing = True
    for index in range(len(classes) - 1, -1, -1):  # L1
        kind = classes[index]
        if kind in ("S", "B"):
            levels[index] = paragraph
            trailing = True
        elif kind in _TRAILING:
            if trailing:
                levels[index] = paragraph
        else:
            trailing = False
    return _reorder(visible, levels)
