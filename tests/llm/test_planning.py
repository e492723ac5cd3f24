"""Tests for LocalModel search planning through the real planning prompt and parser."""

from __future__ import annotations

import json

import attrs
import pytest

from esra.core._config.mapping import Operator
from esra.core._query import PlannedFilter, Strategy
from esra.core.ports import ProviderCapabilities, TextIndexKind
from esra.core.prompts import build_planning_prompt, parse_plan
from esra.llm import LocalModel
from tests.llm._fixtures import (
    ALL_CAPS,
    HR,
    HR_DOCS,
    KEYWORD_ONLY,
    TICKETS,
    plan,
    plan_text,
    strategies,
)

_UNSAFE = (";", "--", "/*", "*/", "#", "\x00")


def test_every_query_targets_a_given_mapping_with_a_listed_strategy() -> None:
    """Queries name only the prompt's mappings and only the provider's strategies."""
    queries = plan("latest PTO policy for remote workers", (HR_DOCS, TICKETS), KEYWORD_ONLY)
    assert queries
    assert {q.mapping_id for q in queries} <= {HR_DOCS.id, TICKETS.id}
    assert set(strategies(queries)) == {"keyword"}


def test_max_queries_caps_the_whole_answer_and_mappings_take_turns() -> None:
    """With two mappings and max_queries=3 there are 3 queries, both mappings served first."""
    queries = plan("latest PTO policy for remote workers", (HR_DOCS, TICKETS), max_queries=3)
    assert len(queries) == 3
    assert [q.mapping_id for q in queries[:2]] == [HR_DOCS.id, TICKETS.id]
    assert len(plan("vacation policy", max_queries=1)) == 1


def test_broad_query_comes_first_and_holds_every_content_word() -> None:
    """The first query ORs every content word, most informative first, none required."""
    broad = plan("What is the refund status of order 20417?")[0]
    assert broad.strategy == "keyword"
    assert broad.required_terms == ()
    assert broad.phrases == ()
    assert broad.optional_terms == ("20417", "refund", "status", "order")


def test_quoted_phrase_becomes_a_phrase_query_after_the_broad_one() -> None:
    """A quoted phrase is searched verbatim (normalized) right after the broad query."""
    broad, quoted = plan('where is the "expense report template" for laptops?')[:2]
    assert set(broad.optional_terms) == {"expense", "report", "template", "laptops"}
    assert quoted.strategy == "phrase"
    assert quoted.phrases == ("expense report template",)
    assert quoted.optional_terms == ("laptops",)


def test_no_phrase_is_invented_when_nothing_is_quoted() -> None:
    """Without quotes no phrase query is planned: an unquoted run of words is no phrase."""
    assert not [q for q in plan("expense report template for travel?") if q.phrases]


def test_only_marked_words_are_required() -> None:
    """Codes, numbers and capitals stay optional; '+word' and 'must include' are required."""
    for request in ("refund status of order 20417", "KENNEDY PRESSURE ON NGO DINH DIEM"):
        assert all(q.required_terms == () for q in plan(request))
    marked = [q for q in plan("refund for order +20417") if q.required_terms]
    assert [(q.required_terms, q.optional_terms) for q in marked] == [
        (("20417",), ("refund", "order"))
    ]
    assert [
        q.required_terms for q in plan("parking that must include permits") if q.required_terms
    ] == [("permits",)]


def test_no_two_queries_share_their_terms() -> None:
    """No query repeats another's terms, whatever strategy it is named."""
    for request in ("laptop refund", "PTO carryover", "parking permits", "latest vacation policy"):
        queries = plan(request, max_queries=10)
        signatures = {
            (q.strategy == "recent", q.required_terms, frozenset(q.optional_terms), q.phrases)
            for q in queries
        }
        assert len(signatures) == len(queries)


def test_words_past_the_term_bound_go_to_another_broad_query() -> None:
    """A question with more content words than a query may hold loses none of them."""
    words = [f"topic{i}" for i in range(40)]
    prompt = build_planning_prompt(
        " ".join(words),
        HR,
        (HR_DOCS,),
        ALL_CAPS,
        max_queries=5,
        model_profile="default",
        max_terms_per_query=16,
    )
    queries = parse_plan(LocalModel().answer(prompt), source_id=HR.id)
    broad = queries[:3]
    assert [len(q.optional_terms) for q in broad] == [16, 16, 8]
    assert sorted(t for q in broad for t in q.optional_terms) == sorted(words)


def test_synonym_query_appears_when_the_vocabulary_knows_a_word() -> None:
    """'laptop refund' gets a synonym query with notebook and reimbursement."""
    synonym = [q for q in plan("laptop refund") if q.strategy == "synonym"]
    assert len(synonym) == 1
    assert {"notebook", "reimbursement"} <= set(synonym[0].optional_terms)
    assert not [q for q in plan("parking permits at reception") if q.strategy == "synonym"]


def test_acronym_query_expands_and_contracts() -> None:
    """PTO is also searched as 'paid time', and 'single sign on' as SSO, all optional."""
    expanded = next(q for q in plan("PTO carryover") if q.strategy == "acronym")
    assert set(expanded.optional_terms) == {"pto", "carryover", "paid", "time"}
    contracted = next(q for q in plan("single sign on problems") if q.strategy == "acronym")
    assert set(contracted.optional_terms) == {"single", "sign", "problems", "sso"}
    assert contracted.required_terms == ()
    assert contracted.phrases == ()
    assert not [q for q in plan("parking permits") if q.strategy == "acronym"]


def test_ambiguous_acronyms_need_capitals() -> None:
    """'IT' is an acronym; 'it' is a pronoun."""
    assert any(q.strategy == "acronym" for q in plan("IT laptop setup"))
    assert not any(q.strategy == "acronym" for q in plan("is it a laptop setup"))


def test_recent_query_only_when_asked_and_supported() -> None:
    """'latest' yields a RECENT query on a mapping with a freshness field, never otherwise."""
    asked = [q for q in plan("latest vacation policy") if q.strategy == "recent"]
    assert [q.optional_terms for q in asked] == [("vacation", "policy")]
    assert not [q for q in plan("vacation policy") if q.strategy == "recent"]
    unsupported = plan("latest tickets about vacation", (TICKETS,))
    assert not [q for q in unsupported if q.strategy == "recent"]


def test_requested_fields_are_returnable_ones_the_request_names() -> None:
    """'region' is named and returnable; 'owner email' is named but not returnable."""
    queries = plan("vacation policy by region and owner email")
    assert all(q.fields == ("region",) for q in queries)
    assert all(q.fields == () for q in plan("vacation policy"))


def test_field_value_filter_on_a_filterable_field() -> None:
    """'region:EMEA' becomes an eq filter, and its words are not searched as terms."""
    queries = plan("vacation policy region:EMEA")
    assert all(q.filters == (PlannedFilter("region", "eq", "EMEA"),) for q in queries)
    assert all("emea" not in q.optional_terms + q.required_terms for q in queries)
    typed = plan("escalations priority:2", (TICKETS,))
    assert typed[0].filters == (PlannedFilter("priority", "eq", 2),)
    assert plan("vacation policy title:EMEA")[0].filters == ()  # title is not filterable


def test_filter_needs_an_operator_the_provider_allows() -> None:
    """eq must be both allowed on the field and supported by the provider."""
    no_eq = ProviderCapabilities(
        strategies=frozenset(Strategy),
        operators=frozenset({Operator.IN}),
        text_index=TextIndexKind.SQLITE_FTS5,
    )
    assert plan("vacation policy region:EMEA", capabilities=no_eq)[0].filters == ()


def test_unsafe_sequences_never_reach_terms() -> None:
    """Separators, comment sequences and control characters are stripped from every term."""
    hostile = 'x"; DROP TABLE users; --" /* hi */ #tag \x00 vacation\x1b policy; --'
    for query in plan(hostile):
        for term in (*query.required_terms, *query.optional_terms, *query.phrases):
            assert not any(s in term for s in _UNSAFE)
            assert term.isprintable()


def test_empty_request_still_meets_the_contract_with_nothing_to_search() -> None:
    """An empty request gets one term-less keyword query (which the validator will reject)."""
    queries = plan("")
    assert len(queries) == 1
    assert queries[0].strategy == "keyword"
    assert queries[0].optional_terms == ()
    assert plan("latest")[0].strategy == "recent"


def test_no_mappings_gives_an_empty_plan_rather_than_an_invented_mapping() -> None:
    """Without mappings the answer names no mapping (the core then uses its fallback)."""
    text = LocalModel().answer(
        build_planning_prompt("vacation", HR, (), ALL_CAPS, max_queries=3, model_profile="p")
    )
    assert json.loads(text) == {"queries": []}


def test_answer_limit_is_left_to_the_mapping_default() -> None:
    """The planner does not guess row limits: limit is null, so the core uses the default."""
    assert all(q.limit is None for q in plan("vacation policy"))
    assert '"limit": null' in plan_text("vacation policy")


@pytest.mark.parametrize(
    "request_text",
    [
        'latest "remote work" policy for IT staff region:EMEA',
        "INV-2041 refund for a broken laptop",
        "single sign on problems, priority:2",
        "vacation policy by region and owner email",
        'x"; DROP TABLE users; -- /* */ #',
    ],
)
def test_plans_pass_the_real_validator(request_text: str) -> None:
    """Every query LocalModel plans for a non-empty request survives core validation."""
    from esra.core._pipeline.selection import Selection
    from esra.core._pipeline.validation import validate
    from tests.core.factories import TENANT, make_context, make_scope, make_scoped

    source = attrs.evolve(HR, tenant_id=TENANT, max_queries_per_source=5)
    mappings = tuple(attrs.evolve(m, tenant_id=TENANT) for m in (HR_DOCS, TICKETS))
    scoped = make_scoped(source, mappings=mappings)
    queries = plan(request_text, mappings, ALL_CAPS, max_queries=5)
    outcome = validate(
        queries,
        ctx=make_context(),
        selection=Selection(sources=(scoped,), warnings=()),
        scope=make_scope([scoped]),
        capabilities={source.id: ALL_CAPS},
    )
    assert outcome.rejections == ()
    assert len(outcome.queries) == len(queries) >= 2
