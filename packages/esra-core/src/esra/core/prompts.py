"""Prompt assembly (core only): fixed section order, marked untrusted data, strict contracts."""

from esra.core._pipeline.rerank import record_item
from esra.core._prompts.builders import (
    AnswerItem,
    RerankItem,
    build_answer_prompt,
    build_planning_prompt,
    build_rerank_prompt,
    build_selection_prompt,
)
from esra.core._prompts.contracts import (
    AnswerDraft,
    parse_answer,
    parse_plan,
    parse_rerank,
    parse_selection,
)
from esra.core._prompts.markers import begin_marker, end_marker, strip_markers, wrap_untrusted
from esra.core._prompts.model import (
    DEFAULT_DATAMARK,
    Prompt,
    PromptTask,
    ReferenceItem,
    SectionKind,
    datamark_for,
)
from esra.core._prompts.schemas import output_schema, output_schema_name
from esra.core._query import PlannedQuery

__all__ = [
    "DEFAULT_DATAMARK",
    "AnswerDraft",
    "AnswerItem",
    "PlannedQuery",
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
    "record_item",
    "strip_markers",
    "wrap_untrusted",
]
