"""Prompt: a typed task with its four sections, rendered in the one fixed order."""

from __future__ import annotations

from enum import StrEnum

import attrs

from esra.core.prompts.markers import begin_marker, end_marker

__all__ = ["Prompt", "PromptTask", "ReferenceItem", "SectionKind"]

REQUEST_TAG = "request"


class PromptTask(StrEnum):
    """The three things ESRA ever asks a model."""

    SELECT_SOURCES = "select_sources"
    PLAN_SEARCHES = "plan_searches"
    RERANK = "rerank"


class SectionKind(StrEnum):
    """Prompt sections in the order they are always rendered."""

    SYSTEM = "system"
    REQUEST = "request"
    REFERENCE = "reference"
    OUTPUT_CONTRACT = "output_contract"


@attrs.frozen
class ReferenceItem:
    """One untrusted item of reference data: its tag and its JSON content (markers stripped)."""

    tag: str
    content: str


@attrs.frozen
class Prompt:
    """A prompt the core assembled. Adapters transport ``render()``; they never build prompts.

    ``request`` is the caller's text with markers stripped; ``reference`` items are JSON
    documents with markers stripped. Reference data is always last before the output contract,
    so the final instruction a model reads is ESRA's.
    """

    task: PromptTask
    model_profile: str
    system: str
    request: str
    reference: tuple[ReferenceItem, ...]
    output_contract: str

    def sections(self) -> tuple[tuple[SectionKind, str], ...]:
        """Return the rendered sections in their fixed order."""
        request = "\n".join((begin_marker(REQUEST_TAG), self.request, end_marker(REQUEST_TAG)))
        reference = "\n".join(
            "\n".join((begin_marker(item.tag), item.content, end_marker(item.tag)))
            for item in self.reference
        )
        return (
            (SectionKind.SYSTEM, self.system),
            (SectionKind.REQUEST, request),
            (SectionKind.REFERENCE, reference),
            (SectionKind.OUTPUT_CONTRACT, self.output_contract),
        )

    def render(self) -> str:
        """Return the whole prompt as text, section headings included."""
        return "\n\n".join(f"### {kind.value.upper()}\n{text}" for kind, text in self.sections())
