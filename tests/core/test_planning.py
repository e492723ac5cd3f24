"""Tests for esra.core._pipeline.planning: per-source concurrent planning and its fallback."""

from __future__ import annotations

import asyncio
import json

import attrs
import pytest

from esra.core._pipeline.planning import (
    PlanningOutcome,
    default_template_queries,
    plan_searches,
)
from esra.core._pipeline.scope import EffectiveScope, ScopedSource
from esra.core._pipeline.selection import Selection
from esra.core._query import PlannedQuery, Strategy
from esra.core.codes import WarningCode
from esra.core.config import (
    CapabilityLimits,
    DefaultTemplate,
    FieldType,
    Operator,
    RecordFilter,
)
from esra.core.exceptions import ModelOutputError
from esra.core.ports import LanguageModel, ProviderCapabilities, TextIndexKind
from esra.core.prompts import Prompt, PromptTask
from esra.core.testing import FakeLanguageModel
from esra.core.testing._invocations import audited_in_scope
from tests.core.factories import (
    make_context,
    make_field,
    make_mapping,
    make_scope,
    make_scoped,
    make_source,
)

REQUEST = "What is the parental leave policy for contractors?"
ALL_CAPS = ProviderCapabilities(
    strategies=frozenset(Strategy),
    operators=frozenset(Operator),
    text_index=TextIndexKind.IN_MEMORY,
)


def _scoped(source_id: str, *, mappings: int = 1, max_queries: int = 3) -> ScopedSource:
    source = make_source(source_id, max_queries_per_source=max_queries)
    return make_scoped(
        source,
        mappings=[make_mapping(f"m-{source_id}-{i}", source_id=source_id) for i in range(mappings)],
    )


def _world(*scoped: ScopedSource, limits: CapabilityLimits | None = None) -> EffectiveScope:
    return make_scope(scoped, limits=limits)


async def _plan(
    scope: EffectiveScope,
    model: LanguageModel,
    *,
    request: str = REQUEST,
    capabilities: dict[str, ProviderCapabilities] | None = None,
) -> PlanningOutcome:
    caps = (
        capabilities if capabilities is not None else {s.source.id: ALL_CAPS for s in scope.sources}
    )
    async with audited_in_scope(make_context(), scope) as invocation:
        return await plan_searches(
            invocation, Selection(sources=scope.sources), request, model=model, capabilities=caps
        )


def _source_name(prompt: Prompt) -> str:
    name: str = json.loads(prompt.reference[0].content)["name"]
    return name


def _plan_answer(prompt: Prompt) -> str:
    """Plan one synonym query per mapping, tagged with the source's name as a term."""
    mappings = [json.loads(i.content)["mapping"] for i in prompt.reference if i.tag != "source"]
    name = _source_name(prompt).replace("Source ", "")
    queries = [
        {"mapping": m, "strategy": "synonym", "optional_terms": [name, "leave"]} for m in mappings
    ]
    return json.dumps({"queries": queries})


async def test_one_model_call_per_selected_source_in_selection_order() -> None:
    """Each selected source gets exactly one planning call; queries keep selection order,
    then model order, and carry their source id."""
    scope = _world(_scoped("s-1", mappings=2), _scoped("s-2"), _scoped("s-3"))
    model = FakeLanguageModel({PromptTask.PLAN_SEARCHES: _plan_answer})
    outcome = await _plan(scope, model)
    prompts = model.prompts_for(PromptTask.PLAN_SEARCHES)
    assert sorted(_source_name(p) for p in prompts) == ["Source s-1", "Source s-2", "Source s-3"]
    assert len(model.prompts) == 3
    assert [(q.source_id, q.mapping_id) for q in outcome.queries] == [
        ("s-1", "m-s-1-0"),
        ("s-1", "m-s-1-1"),
        ("s-2", "m-s-2-0"),
        ("s-3", "m-s-3-0"),
    ]
    assert all(q.strategy == "synonym" for q in outcome.queries)
    assert outcome.warnings == ()


async def test_no_selected_sources_means_no_model_call() -> None:
    """An empty selection plans nothing and calls no model."""
    model = FakeLanguageModel()
    async with audited_in_scope(make_context(), _world(_scoped("s-1"))) as invocation:
        outcome = await plan_searches(
            invocation, Selection(sources=()), REQUEST, model=model, capabilities={}
        )
    assert outcome == PlanningOutcome(queries=(), warnings=())
    assert model.prompts == []


class BarrierModel:
    """A model whose every call waits until ``expected`` calls are in flight at once.

    Sequential planning would never release the first call, so the test's guard fails it;
    concurrent planning releases all of them together.
    """

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.in_flight = 0
        self.max_in_flight = 0
        self.all_started = asyncio.Event()

    async def complete(self, prompt: Prompt) -> str:
        """Wait for every expected call to start, then answer with a plan."""
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.in_flight == self.expected:
            self.all_started.set()
        await self.all_started.wait()
        self.in_flight -= 1
        return _plan_answer(prompt)


async def test_sources_are_planned_concurrently() -> None:
    """All planning calls are in flight at the same time (a barrier only opens when the last
    one starts; the timeout only guards against a hang)."""
    scope = _world(_scoped("s-1"), _scoped("s-2"), _scoped("s-3"), _scoped("s-4"))
    model = BarrierModel(expected=4)
    async with asyncio.timeout(10):
        outcome = await _plan(scope, model)
    assert model.max_in_flight == 4
    assert [q.source_id for q in outcome.queries] == ["s-1", "s-2", "s-3", "s-4"]


def _fail_for(name: str, error: Exception) -> FakeLanguageModel:
    def responder(prompt: Prompt) -> str:
        if _source_name(prompt) == name:
            raise error
        return _plan_answer(prompt)

    return FakeLanguageModel({PromptTask.PLAN_SEARCHES: responder})


@pytest.mark.parametrize(
    "error", [RuntimeError("upstream 500: internal detail"), ModelOutputError(), TimeoutError()]
)
async def test_a_failing_source_falls_back_while_others_keep_their_plans(
    error: Exception,
) -> None:
    """A source whose call fails gets default-template queries and a fallback warning naming
    it; the other sources keep their model plans."""
    scope = _world(_scoped("s-1"), _scoped("s-2"), _scoped("s-3"))
    outcome = await _plan(scope, _fail_for("Source s-2", error))
    by_source = {
        sid: [q.strategy for q in outcome.queries if q.source_id == sid]
        for sid in ("s-1", "s-2", "s-3")
    }
    assert by_source == {
        "s-1": ["synonym"],
        "s-2": ["keyword", "phrase"],
        "s-3": ["synonym"],
    }
    assert [q.source_id for q in outcome.queries] == ["s-1", "s-2", "s-2", "s-3"]
    [warning] = outcome.warnings
    assert warning.code is WarningCode.ESRA_PLANNING_FALLBACK
    assert "Source s-2" in warning.message
    assert "internal detail" not in warning.message


async def test_an_answer_outside_the_contract_falls_back() -> None:
    """A non-JSON planning answer falls back to the default template."""
    model = FakeLanguageModel({PromptTask.PLAN_SEARCHES: lambda _p: "SELECT * FROM users"})
    outcome = await _plan(_world(_scoped("s-1")), model)
    assert [q.strategy for q in outcome.queries] == ["keyword", "phrase"]
    assert [w.code for w in outcome.warnings] == [WarningCode.ESRA_PLANNING_FALLBACK]


async def test_missing_provider_capabilities_fall_back_without_a_model_call() -> None:
    """A source whose provider capabilities are unknown is not sent to the model."""
    model = FakeLanguageModel()
    outcome = await _plan(_world(_scoped("s-1")), model, capabilities={})
    assert model.prompts == []
    assert [w.code for w in outcome.warnings] == [WarningCode.ESRA_PLANNING_FALLBACK]
    assert outcome.queries


def _sensitive_scoped() -> ScopedSource:
    source = make_source(
        "s-hr",
        name="HR Policies",
        provider_kind="postgres_kind_zz9",
        connection_ref="vault://conn-ref-zz9",
        max_queries_per_source=4,
    )
    mapping = make_mapping(
        "m-hr",
        source_id="s-hr",
        relation="phys_relation_zz9",
        schema="phys_schema_zz9",
        record_key="phys_key_zz9",
        text_index="phys_index_zz9",
        fields=[
            make_field("title", column="phys_title_col_zz9"),
            make_field("body", column="phys_body_col_zz9"),
            make_field(
                "region",
                column="phys_region_col_zz9",
                filterable=True,
                operators=[Operator.EQ, Operator.IN],
            ),
            make_field(
                "salary_band_restricted",
                column="phys_salary_col_zz9",
                type=FieldType.NUMBER,
                restricted=True,
                returnable=False,
                description="restricted-description-zz9",
            ),
        ],
        record_filters=(RecordFilter(field="region", claim="claim_region_zz9"),),
    )
    return make_scoped(source, mappings=[mapping])


async def test_planning_prompt_holds_no_physical_or_restricted_detail() -> None:
    """The rendered planning prompt names no relation, schema, text index, physical column,
    record key, restricted field, record-filter claim, connection ref or provider kind, but
    does carry the business schema and the source's query ceiling."""
    model = FakeLanguageModel()
    await _plan(_world(_sensitive_scoped()), model)
    [prompt] = model.prompts
    rendered = prompt.render()
    for leaked in (
        "phys_relation_zz9",
        "phys_schema_zz9",
        "phys_key_zz9",
        "phys_index_zz9",
        "phys_title_col_zz9",
        "phys_body_col_zz9",
        "phys_region_col_zz9",
        "phys_salary_col_zz9",
        "salary_band_restricted",
        "restricted-description-zz9",
        "claim_region_zz9",
        "vault://conn-ref-zz9",
        "postgres_kind_zz9",
    ):
        assert leaked not in rendered, leaked
    assert "HR Policies" in rendered
    assert '"fieldName": "region"' in rendered
    assert "between 1 and 4 queries" in rendered


def _template(
    request: str = REQUEST,
    *,
    mappings: int = 1,
    max_queries: int = 20,
    max_term_chars: int = 200,
) -> tuple[PlannedQuery, ...]:
    return default_template_queries(
        request, _scoped("s-1", mappings=mappings, max_queries=max_queries), max_term_chars
    )


def test_template_is_a_keyword_and_a_phrase_query_per_mapping() -> None:
    """Per mapping the template plans a KEYWORD query over the content words and a PHRASE
    query over the whole request, with the mapping's default limit and fields."""
    scoped = make_scoped(
        make_source("s-1"),
        mappings=[
            make_mapping("m-1", source_id="s-1", default_template=DefaultTemplate(7, ("title",)))
        ],
    )
    keyword, phrase = default_template_queries(REQUEST, scoped, 200)
    assert keyword.strategy == Strategy.KEYWORD
    assert keyword.optional_terms == ("parental", "leave", "policy", "contractors")
    assert phrase.strategy == Strategy.PHRASE
    assert phrase.phrases == ("What is the parental leave policy for contractors",)
    for query in (keyword, phrase):
        assert (query.source_id, query.mapping_id) == ("s-1", "m-1")
        assert query.limit == 7
        assert query.fields == ("title",)


def test_template_terms_are_lowercased_deduplicated_and_all_kept() -> None:
    """Content words are lowercased and deduplicated in order; none is dropped for count."""
    words = " ".join(f"Word{i} word{i}" for i in range(30))
    (keyword, _) = _template(words)
    assert keyword.optional_terms == tuple(f"word{i}" for i in range(30))


def test_template_honours_max_queries_per_source() -> None:
    """The template is truncated to the source's ceiling, keyword queries of every mapping
    first."""
    queries = _template(mappings=3, max_queries=4)
    assert [(q.mapping_id, q.strategy) for q in queries] == [
        ("m-s-1-0", "keyword"),
        ("m-s-1-1", "keyword"),
        ("m-s-1-2", "keyword"),
        ("m-s-1-0", "phrase"),
    ]
    assert [q.strategy for q in _template(max_queries=1)] == ["keyword"]


async def test_fallback_through_plan_searches_honours_max_queries() -> None:
    """A failing source's fallback never exceeds its MaxQueriesPerSource."""
    model = _fail_for("Source s-1", RuntimeError())
    outcome = await _plan(_world(_scoped("s-1", mappings=2, max_queries=1)), model)
    assert len(outcome.queries) == 1


def test_phrase_is_cut_on_a_word_boundary() -> None:
    """The phrase stops at the last whole word that fits within max_term_chars."""
    (_, phrase) = _template("alpha beta gamma delta", max_term_chars=16)
    assert phrase.phrases == ("alpha beta gamma",)
    (long_word,) = _template("x" * 30, max_term_chars=10)  # too long to be a keyword term
    assert long_word.phrases == ("x" * 10,)


@pytest.mark.parametrize(
    "request_text",
    [
        "leave'; DROP TABLE staff; --",
        "policy /* comment */ leave # note",
        "leave\x00policy\x1b[31m",
        'policy" OR 1=1 -- ',
    ],
)
def test_template_terms_carry_no_unsafe_sequences(request_text: str) -> None:
    """Separators, comment sequences, quotes and control characters never reach the
    template's terms or phrase."""
    for query in _template(request_text):
        for text in (*query.optional_terms, *query.phrases):
            for unsafe in (";", "--", "/*", "*/", "#", "'", '"', "\x00", "\x1b"):
                assert unsafe not in text


def test_template_drops_stopwords_and_skips_empty_queries() -> None:
    """A request of stopwords and punctuation only yields no keyword query, just the phrase;
    one of punctuation only yields nothing."""
    queries = _template("what is the")
    assert [q.strategy for q in queries] == ["phrase"]
    assert _template(";;; -- /* */") == ()


async def test_fallback_respects_provider_strategies_and_row_cap() -> None:
    """The fallback leaves out strategies the provider lacks and caps the template limit at
    the policy and provider maxima, so it validates."""
    caps = ProviderCapabilities(
        strategies=frozenset({Strategy.KEYWORD}),
        operators=frozenset(),
        text_index=TextIndexKind.IN_MEMORY,
        max_rows=5,
    )
    model = _fail_for("Source s-1", RuntimeError())
    outcome = await _plan(_world(_scoped("s-1")), model, capabilities={"s-1": caps})
    assert [(q.strategy, q.limit) for q in outcome.queries] == [("keyword", 5)]


async def test_fallback_respects_capability_term_limit() -> None:
    """The fallback's keyword terms stay within the capability's max_terms_per_query."""
    words = " ".join(f"word{i}" for i in range(30))
    model = _fail_for("Source s-1", RuntimeError())
    outcome = await _plan(
        _world(_scoped("s-1"), limits=CapabilityLimits(max_terms_per_query=5)),
        model,
        request=words,
    )
    assert len(outcome.queries[0].optional_terms) == 5


_FOUR_SCORED = attrs.evolve(ALL_CAPS, max_scored_terms=4)


async def test_the_planning_prompt_states_the_providers_lower_term_bound() -> None:
    """A provider that scores fewer terms per statement than the policy allows is planned for
    with its own bound, so the planner spreads words instead of being refused for them."""
    stated: list[int] = []

    def responder(prompt: Prompt) -> str:
        stated.append(json.loads(prompt.reference[0].content)["max_terms_per_query"])
        return _plan_answer(prompt)

    model = FakeLanguageModel({PromptTask.PLAN_SEARCHES: responder})
    scope = _world(_scoped("s-1"), _scoped("s-2"), limits=CapabilityLimits(max_terms_per_query=9))
    await _plan(scope, model, capabilities={"s-1": _FOUR_SCORED, "s-2": ALL_CAPS})
    assert sorted(stated) == [4, 9]


async def test_fallback_respects_the_providers_scored_term_limit() -> None:
    """The fallback's keyword queries hold no more terms than the provider scores."""
    words = [f"word{i}" for i in range(10)]
    outcome = await _plan(
        _world(_scoped("s-1", max_queries=4)),
        _fail_for("Source s-1", RuntimeError()),
        request=" ".join(words),
        capabilities={"s-1": _FOUR_SCORED},
    )
    keyword = [q for q in outcome.queries if q.strategy == "keyword"]
    assert [len(q.optional_terms) for q in keyword] == [4, 4, 2]


async def test_fallback_spreads_words_past_the_term_limit_over_more_queries() -> None:
    """A request with more content words than one query holds loses none of them: the rest
    go into further keyword queries, all before the phrase query."""
    words = [f"word{i}" for i in range(12)]
    model = _fail_for("Source s-1", RuntimeError())
    outcome = await _plan(
        _world(_scoped("s-1", max_queries=4), limits=CapabilityLimits(max_terms_per_query=5)),
        model,
        request=" ".join(words),
    )
    keyword = [q for q in outcome.queries if q.strategy == "keyword"]
    assert [len(q.optional_terms) for q in keyword] == [5, 5, 2]
    assert [t for q in keyword for t in q.optional_terms] == words
    assert outcome.queries[-1].strategy == "phrase"


async def test_cancellation_propagates() -> None:
    """A cancellation arriving during a planning call propagates instead of becoming a
    fallback plan (a deadline must stop planning, not degrade it)."""

    class CancelledModel:
        async def complete(self, prompt: Prompt) -> str:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await _plan(_world(_scoped("s-1")), CancelledModel())
