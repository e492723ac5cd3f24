"""Prompt assembly (core only): fixed section order, marked untrusted data, strict contracts."""

from esra.core.prompts.builders import (
    AnswerItem,
    RerankItem,
    build_answer_prompt,
    build_planning_prompt,
    build_rerank_prompt,
    build_selection_prompt,
)
from esra.core.prompts.contracts import (
    AnswerDraft,
    parse_answer,
    parse_plan,
    parse_rerank,
    parse_selection,
)
from esra.core.prompts.markers import begin_marker, end_marker, strip_markers, wrap_untrusted
from esra.core.prompts.model import (
    DEFAULT_DATAMARK,
    Prompt,
    PromptTask,
    ReferenceItem,
    SectionKind,
    datamark_for,
)
from esra.core.prompts.schemas import output_schema, output_schema_name

__all__ = [
    "DEFAULT_DATAMARK",
    "AnswerDraft",
    "AnswerItem",
    "Prompt",
    "PromptTask",
    "ReferenceItem",
    "RerankItem",
    "SectionKind",
    "begin_marker",
    "build_answer_prompt",
    "build_planning_prompt",
    "build_rerank_prompt",
    "build_selection_prompt",
    "datamark_for",
    "end_marker",
    "output_schema",
    "output_schema_name",
    "parse_answer",
    "parse_plan",
    "parse_rerank",
    "parse_selection",
    "strip_markers",
    "wrap_untrusted",
]
