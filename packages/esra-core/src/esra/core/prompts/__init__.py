"""Prompt assembly (core only): fixed section order, marked untrusted data, strict contracts."""

from esra.core.prompts.builders import (
    RerankItem,
    build_planning_prompt,
    build_rerank_prompt,
    build_selection_prompt,
)
from esra.core.prompts.contracts import parse_plan, parse_rerank, parse_selection
from esra.core.prompts.markers import begin_marker, end_marker, strip_markers, wrap_untrusted
from esra.core.prompts.model import Prompt, PromptTask, ReferenceItem, SectionKind

__all__ = [
    "Prompt",
    "PromptTask",
    "ReferenceItem",
    "RerankItem",
    "SectionKind",
    "begin_marker",
    "build_planning_prompt",
    "build_rerank_prompt",
    "build_selection_prompt",
    "end_marker",
    "parse_plan",
    "parse_rerank",
    "parse_selection",
    "strip_markers",
    "wrap_untrusted",
]
