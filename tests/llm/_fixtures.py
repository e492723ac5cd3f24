"""Realistic sources, mappings and capabilities, and helpers that run LocalModel on real prompts."""

from __future__ import annotations

import json
from collections.abc import Sequence

from esra.core._config.mapping import FieldSpec, FieldType, Mapping, Operator
from esra.core._config.source import Source
from esra.core._query import PlannedQuery, Strategy
from esra.core.ports import ProviderCapabilities, TextIndexKind
from esra.core.prompts import (
    RerankItem,
    build_planning_prompt,
    build_rerank_prompt,
    build_selection_prompt,
    parse_plan,
    parse_rerank,
    parse_selection,
)
from esra.llm import LocalModel

__all__ = [
    "ALL_CAPS",
    "HR",
    "HR_DOCS",
    "KEYWORD_ONLY",
    "PAYROLL",
    "PRODUCT",
    "RESULTS",
    "SOURCES",
    "SUPPORT",
    "TICKETS",
    "answer_keys",
    "plan",
    "plan_text",
    "rerank",
    "rerank_text",
    "select",
    "selection_text",
    "strategies",
]

PROFILE = "default"
MODEL = LocalModel()


def _source(source_id: str, name: str, description: str, **extra: object) -> Source:
    return Source(
        id=source_id,
        tenant_id="acme",
        name=name,
        description=description,
        provider_kind="sqlite",
        connection_ref="secret://db",
        **extra,  # type: ignore[arg-type]
    )


HR = _source(
    "src_a1f3",
    "HR Policies",
    "Company handbook: vacation and leave rules, benefits, onboarding, remote work.",
    usage_guidance="Use for questions about employment policies and entitlements.",
    exclusion_guidance="Not for individual salary or payroll figures.",
    domain_tags=("hr", "policy", "benefits"),
    example_prompts=("How many vacation days do new hires get?",),
)
PAYROLL = _source(
    "src_b7e2",
    "Payroll",
    "Employee salary, bonus and payslip records.",
    usage_guidance="Use for compensation amounts and pay dates.",
    domain_tags=("payroll", "compensation"),
)
SUPPORT = _source(
    "src_c9d4",
    "Customer Support Tickets",
    "Tickets customers opened about our products, with resolution notes.",
    usage_guidance="Use for known problems, outages and how they were resolved.",
    domain_tags=("support", "incidents"),
    example_prompts=("open tickets about login failures",),
)
PRODUCT = _source(
    "src_d2c8",
    "Product Catalog",
    "Hardware catalog with laptop, monitor and docking station models and prices.",
    domain_tags=("products", "hardware"),
    example_prompts=("Which laptops have 32GB of memory?",),
)
SOURCES = (HR, PAYROLL, SUPPORT, PRODUCT)

HR_DOCS = Mapping(
    id="map_hr_docs",
    tenant_id="acme",
    source_id=HR.id,
    business_name="Policy documents",
    description="One row per handbook page.",
    relation="hr_pages",
    record_key="page_id",
    title_field="title",
    content_fields=("body",),
    fields=(
        FieldSpec("title", "title", is_searchable=True, is_returnable=True),
        FieldSpec("body", "body", is_searchable=True, is_returnable=True),
        FieldSpec(
            "region",
            "region_code",
            is_filterable=True,
            is_returnable=True,
            allowed_operators=frozenset({Operator.EQ, Operator.IN}),
        ),
        FieldSpec("ownerEmail", "owner_email", is_returnable=False, description="Page owner"),
        FieldSpec("auditNotes", "audit", is_returnable=True, is_restricted=True),
        FieldSpec("updatedAt", "updated_at", type=FieldType.DATE, is_returnable=True),
    ),
    freshness_field="updatedAt",
)
TICKETS = Mapping(
    id="map_tickets",
    tenant_id="acme",
    source_id=HR.id,
    business_name="Tickets",
    description="HR helpdesk tickets.",
    relation="tickets",
    record_key="ticket_id",
    title_field="subject",
    content_fields=("notes",),
    fields=(
        FieldSpec("subject", "subject", is_searchable=True, is_returnable=True),
        FieldSpec("notes", "notes", is_searchable=True, is_returnable=True),
        FieldSpec("requesterEmail", "requester", is_returnable=False),
        FieldSpec(
            "priority",
            "prio",
            type=FieldType.INTEGER,
            is_filterable=True,
            is_returnable=True,
            allowed_operators=frozenset({Operator.EQ}),
        ),
    ),
)

ALL_CAPS = ProviderCapabilities(
    strategies=frozenset(Strategy),
    operators=frozenset(Operator),
    text_index=TextIndexKind.SQLITE_FTS5,
)
KEYWORD_ONLY = ProviderCapabilities(
    strategies=frozenset({Strategy.KEYWORD}),
    operators=frozenset({Operator.EQ}),
    text_index=TextIndexKind.SQLITE_FTS5,
)

RESULTS = (
    RerankItem(
        "r_vac",
        "HR Policies",
        "Vacation carryover policy",
        ("Unused paid time off may be carried over into the next year, up to five days.",),
    ),
    RerankItem(
        "r_printer",
        "Customer Support Tickets",
        "Printer jam on floor 3",
        ("The printer on the third floor jams when printing double-sided.",),
    ),
    RerankItem(
        "r_parking",
        "HR Policies",
        "Parking permits",
        ("Employees may apply for a parking permit at reception.",),
    ),
)


def selection_text(request: str, sources: Sequence[Source] = SOURCES) -> str:
    """Return LocalModel's raw answer to the real selection prompt."""
    return MODEL.answer(build_selection_prompt(request, sources, model_profile=PROFILE))


def select(request: str, sources: Sequence[Source] = SOURCES) -> tuple[str, ...]:
    """Return the ids LocalModel selects, as the core parses them."""
    return parse_selection(selection_text(request, sources))


def plan_text(
    request: str,
    mappings: Sequence[Mapping] = (HR_DOCS,),
    capabilities: ProviderCapabilities = ALL_CAPS,
    max_queries: int = 5,
) -> str:
    """Return LocalModel's raw answer to the real planning prompt for the HR source."""
    prompt = build_planning_prompt(
        request, HR, mappings, capabilities, max_queries=max_queries, model_profile=PROFILE
    )
    return MODEL.answer(prompt)


def plan(
    request: str,
    mappings: Sequence[Mapping] = (HR_DOCS,),
    capabilities: ProviderCapabilities = ALL_CAPS,
    max_queries: int = 5,
) -> tuple[PlannedQuery, ...]:
    """Return LocalModel's planned queries, as the core parses them."""
    return parse_plan(plan_text(request, mappings, capabilities, max_queries), source_id=HR.id)


def rerank_text(request: str, results: Sequence[RerankItem] = RESULTS) -> str:
    """Return LocalModel's raw answer to the real rerank prompt."""
    return MODEL.answer(build_rerank_prompt(request, results, model_profile=PROFILE))


def rerank(request: str, results: Sequence[RerankItem] = RESULTS) -> dict[str, float]:
    """Return LocalModel's scores, as the core parses them."""
    return parse_rerank(rerank_text(request, results))


def strategies(queries: Sequence[PlannedQuery]) -> list[str]:
    """Return the strategy of each query, in order."""
    return [q.strategy for q in queries]


def answer_keys(text: str) -> list[str]:
    """Return the top-level keys of an answer (which must be one JSON object)."""
    value = json.loads(text)
    assert isinstance(value, dict)
    return sorted(value)
