"""Prompt: a typed task with its four sections, rendered in the one fixed order."""

from __future__ import annotations

import functools
import json
import re
from enum import StrEnum
from typing import Any

import attrs

from esra.core._prompts.markers import begin_marker, end_marker, strip_markers, untrusted_json
from esra.core._text_normalisation import fold_char

__all__ = [
    "DEFAULT_DATAMARK",
    "Prompt",
    "PromptTask",
    "ReferenceItem",
    "SectionKind",
    "datamark_for",
    "datamark_text",
    "validate_datamark",
]

REQUEST_TAG = "request"


class PromptTask(StrEnum):
    """The four things ESRA ever asks a model."""

    SELECT_SOURCES = "select_sources"
    PLAN_SEARCHES = "plan_searches"
    RERANK = "rerank"
    ANSWER = "answer"


class SectionKind(StrEnum):
    """Prompt sections in the order they are always rendered."""

    SYSTEM = "system"
    REQUEST = "request"
    REFERENCE = "reference"
    OUTPUT_CONTRACT = "output_contract"


class ReferenceItem:
    """One untrusted item of reference data: its tag and its JSON content (markers stripped).

    ``value``, when the core built the item, is the stripped value ``content`` is serialized
    from (equal to ``json.loads(content)``): an in-process model can read it instead of
    parsing the text back. It is read-only by contract, takes no part in equality, and is
    ``None`` for items built from text alone (a reader then parses ``content``).

    An item made by :meth:`of_value` serializes its content only when someone reads it: a
    model that reads ``value`` in the same process never pays for the JSON text.
    """

    __slots__ = ("_content", "tag", "value")

    tag: str
    value: Any
    _content: str | None

    def __init__(self, tag: str, content: str, value: Any = None) -> None:
        _set = object.__setattr__
        _set(self, "tag", tag)
        _set(self, "_content", content)
        _set(self, "value", value)

    @classmethod
    def of_value(cls, tag: str, value: Any) -> ReferenceItem:
        """The item whose content is ``value`` as JSON (sorted keys, non-ASCII kept), made
        when first read. ``value`` must be JSON-ready and stripped of markers already."""
        item = cls.__new__(cls)
        _set = object.__setattr__
        _set(item, "tag", tag)
        _set(item, "_content", None)
        _set(item, "value", value)
        return item

    @property
    def content(self) -> str:
        """The item as JSON text."""
        content = self._content
        if content is None:
            content = untrusted_json(self.value)
            object.__setattr__(self, "_content", content)
        return content

    def __setattr__(self, name: str, value: object) -> None:
        raise attrs.exceptions.FrozenInstanceError

    def __delattr__(self, name: str) -> None:
        raise attrs.exceptions.FrozenInstanceError

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReferenceItem) or other.__class__ is not self.__class__:
            return NotImplemented
        return self.tag == other.tag and self.content == other.content

    def __hash__(self) -> int:
        return hash((self.tag, self.content))

    def __repr__(self) -> str:
        return f"ReferenceItem(tag={self.tag!r}, content={self.content!r})"

    def __reduce__(self) -> tuple[type[ReferenceItem], tuple[str, str, Any]]:
        # Copies and pickles go through the constructor: the slots refuse plain assignment.
        return ReferenceItem, (self.tag, self.content, self.value)


_WHITESPACE = re.compile(r"\s+")
# A datamark is a short run of visible symbols: never an ASCII letter or digit, whitespace, an
# invisible character, a JSON or marker delimiter, or anything marker stripping would remove.
_DATAMARK_FORBIDDEN = frozenset('<>{}[]"\\')


def _datamark_char(char: str) -> bool:
    return (
        char.isprintable()
        and not char.isspace()
        and not (char.isascii() and char.isalnum())
        and char not in _DATAMARK_FORBIDDEN
    )


def validate_datamark(_: object, __: object, value: str | None) -> None:
    """Raise ``ValueError`` unless ``value`` is ``None`` or 1 to 4 visible symbols."""
    if value is not None and not (
        1 <= len(value) <= 4
        and all(_datamark_char(c) for c in value)
        and strip_markers(value) == value
    ):
        msg = "a datamark is 1 to 4 visible symbols, not letters, digits or delimiters"
        raise ValueError(msg)


# U+02C6 MODIFIER LETTER CIRCUMFLEX ACCENT, the mark of the Spotlighting paper: visible, rare in
# enterprise text, and a single token for common tokenizers.
DEFAULT_DATAMARK = "\u02c6"


def datamark_for(datamark_untrusted: bool) -> str | None:
    """Return the datamark a capability's ``datamark_untrusted`` setting asks for, or ``None``."""
    return DEFAULT_DATAMARK if datamark_untrusted else None


# What a marker token (see markers._TOKEN) is made of, as its case-insensitive pattern matches.
_TOKEN_CHAR = re.compile(r"(?i)[a-z\s_<-]")


@functools.cache
def _inert(mark: str) -> bool:
    """True when ``mark`` can never be part of a marker token, so putting it in place of
    whitespace can never make one: every character stays visible after folding, and folds to
    nothing a token is made of (a letter of it, whitespace, a dash, an underscore or ``<``)."""
    return all((folded := fold_char(char)) and not _TOKEN_CHAR.search(folded) for char in mark)


def datamark_text(text: str, mark: str) -> str:
    """Interleave ``mark`` between the words of ``text`` (Spotlighting's datamarking).

    Every run of whitespace becomes ``mark``, and any ``mark`` already present is removed
    first, so untrusted text cannot show an unmarked stretch by carrying the mark itself.

    Markers are stripped after the mark is removed (removing it can join a token's parts),
    and again after marking unless the mark is inert (a mark that folds to a dash, a letter
    or nothing could join spaced words into one): no transformation that could assemble a
    token runs after the last stripping.
    """
    marked = _WHITESPACE.sub(mark, strip_markers(text.replace(mark, "")).strip())
    return marked if _inert(mark) else strip_markers(marked)


def _datamark_value(value: Any, mark: str) -> Any:
    if isinstance(value, str):
        return datamark_text(value, mark)
    if isinstance(value, dict):
        return {k: _datamark_value(v, mark) for k, v in value.items()}
    if isinstance(value, list):
        return [_datamark_value(v, mark) for v in value]
    return value


def _datamark_content(content: str, mark: str) -> str:
    # Only string values are marked: keys are ESRA's own, and the JSON stays valid.
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return datamark_text(content, mark)
    return untrusted_json(_datamark_value(value, mark))


@attrs.frozen
class Prompt:
    """A prompt the core assembled. Adapters transport ``render()``; they never build prompts.

    ``request`` is the caller's text with markers stripped; ``reference`` items are JSON
    documents with markers stripped. Reference data is always last before the output contract,
    so the final instruction a model reads is ESRA's.

    ``datamark`` (off by default) is Spotlighting's datamarking: when set, ``render()`` and
    ``sections()`` interleave it between the words of every reference item's string values,
    so untrusted text reads as visibly marked data. The system text, the request and the
    output contract are never marked; ``reference`` itself stays unmarked JSON.
    """

    task: PromptTask
    model_profile: str
    system: str
    request: str
    reference: tuple[ReferenceItem, ...]
    output_contract: str
    datamark: str | None = attrs.field(default=None, validator=validate_datamark)

    def sections(self) -> tuple[tuple[SectionKind, str], ...]:
        """Return the rendered sections in their fixed order."""
        request = "\n".join((begin_marker(REQUEST_TAG), self.request, end_marker(REQUEST_TAG)))
        reference = "\n".join(
            "\n".join((begin_marker(item.tag), self._content(item), end_marker(item.tag)))
            for item in self.reference
        )
        return (
            (SectionKind.SYSTEM, self.system),
            (SectionKind.REQUEST, request),
            (SectionKind.REFERENCE, reference),
            (SectionKind.OUTPUT_CONTRACT, self.output_contract),
        )

    def _content(self, item: ReferenceItem) -> str:
        if self.datamark is None:
            return item.content
        return _datamark_content(item.content, self.datamark)

    def render(self) -> str:
        """Return the whole prompt as text, section headings included."""
        return "\n\n".join(f"### {kind.value.upper()}\n{text}" for kind, text in self.sections())
