"""The planning invariant: ESRA's planned queries never find less than a plain OR search.

For any question, the union of the rows the LocalModel's validated plan retrieves holds every
row the engine's own OR of the question's content words retrieves within the same row cap.
Checked on a real SQLite FTS5 index without stemming (where word forms matter most), over
questions mixing word forms, capitals, codes, stop words, quotes and ``+`` marks.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esra.core._pipeline.selection import Selection
from esra.core._pipeline.validation import validate
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, Strategy
from esra.core.config import CapabilityLimits, DefaultTemplate, FieldSpec, Mapping
from esra.core.prompts import build_planning_prompt, parse_plan
from esra.llm import LocalModel
from esra.llm._text import search_words
from esra.sqlite import SqliteFts5Provider, create_fts5_index
from tests.core.factories import TENANT, make_context, make_scope, make_scoped, make_source

ROWS = 8
_SOURCE = make_source("papers", max_queries_per_source=6)
_MAPPING = Mapping(
    id="papers",
    tenant_id=TENANT,
    source_id=_SOURCE.id,
    business_name="Papers",
    description="Research papers.",
    relation="papers",
    text_index="papers_fts",
    record_key="pid",
    title_field="title",
    content_fields=("body",),
    default_template=DefaultTemplate(limit=ROWS),
    fields=(
        FieldSpec(name="pid", column="pid", is_returnable=True),
        FieldSpec(name="title", column="title", is_searchable=True, is_returnable=True),
        FieldSpec(name="body", column="body", is_searchable=True, is_returnable=True),
    ),
)
_VOCABULARY = (
    *("layer", "layers", "boundary", "flow", "flows", "shock", "waves", "wave", "heat"),
    *("transfer", "nasa", "x15", "2041", "information", "data", "retrieval", "systems"),
    *("system", "pressure", "pressures", "wing", "wings", "laminar", "turbulent"),
)
_NOISE = ("the", "of", "what", "is", "are", "there", "and", "how", "for", "in", "WHAT", "ARE")
_LIMITS = CapabilityLimits()


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteFts5Provider]:
    path = Path(tmp_path_factory.mktemp("recall")) / "papers.db"
    draw = random.Random(7)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE papers (pid INTEGER PRIMARY KEY, title TEXT, body TEXT)")
        conn.executemany(
            "INSERT INTO papers VALUES (?, ?, ?)",
            [
                (
                    n,
                    " ".join(draw.sample(_VOCABULARY, 2)),
                    " ".join(draw.choices(_VOCABULARY, k=draw.randint(3, 12))),
                )
                for n in range(1, 121)
            ],
        )
        # No stemming: "layers" and "layer" are different words to this index.
        create_fts5_index(conn, _MAPPING, tokenize="unicode61 remove_diacritics 2")
        conn.commit()
    opened = SqliteFts5Provider(path, mappings=(_MAPPING,))
    yield opened
    opened.close()


def _planned(provider: SqliteFts5Provider, question: str) -> tuple[ValidatedQuery, ...]:
    capabilities = provider.capabilities
    prompt = build_planning_prompt(
        question,
        _SOURCE,
        (_MAPPING,),
        capabilities,
        max_queries=_SOURCE.max_queries_per_source,
        model_profile="default",
        max_terms_per_query=_LIMITS.max_terms_per_query,
    )
    planned = parse_plan(LocalModel().answer(prompt), source_id=_SOURCE.id)
    scoped = make_scoped(_SOURCE, mappings=(_MAPPING,))
    outcome = validate(
        planned,
        ctx=make_context(),
        selection=Selection(sources=(scoped,), warnings=()),
        scope=make_scope([scoped], limits=_LIMITS),
        capabilities={_SOURCE.id: capabilities},
    )
    assert outcome.rejections == ()
    return outcome.queries


def _or_of_content_words(question: str) -> ValidatedQuery:
    return _issue(
        query_id="or#1",
        source_id=_SOURCE.id,
        mapping=_MAPPING,
        strategy=Strategy.KEYWORD,
        required_terms=(),
        optional_terms=tuple(search_words(question)),
        excluded_terms=(),
        phrases=(),
        filters=(),
        record_filters=(),
        projection=(ProjectedField("title", "title"),),
        freshness=None,
        row_limit=ROWS,
    )


async def _keys(provider: SqliteFts5Provider, queries: tuple[ValidatedQuery, ...]) -> set[str]:
    found: set[str] = set()
    for query in queries:
        found.update(row.key for row in await provider.execute(query, timeout_s=10.0))
    return found


_WORD = st.sampled_from((*_VOCABULARY, *(w.upper() for w in _VOCABULARY[:6]), *_NOISE))
_PIECE = st.one_of(
    _WORD,
    _WORD.map(lambda w: f"+{w}"),
    st.lists(_WORD, min_size=1, max_size=3).map(lambda ws: '"' + " ".join(ws) + '"'),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pieces=st.lists(_PIECE, min_size=1, max_size=30))
def test_plan_union_holds_every_row_the_or_search_finds(
    provider: SqliteFts5Provider, pieces: list[str]
) -> None:
    """Whatever the question, no row the OR of its content words finds is lost by the plan."""
    question = " ".join(pieces)
    if not search_words(question):
        return
    engine = asyncio.run(_keys(provider, (_or_of_content_words(question),)))
    planned = asyncio.run(_keys(provider, _planned(provider, question)))
    assert engine <= planned


def test_a_long_question_keeps_its_last_words(provider: SqliteFts5Provider) -> None:
    """A question's telling word may be its fortieth: it is still searched, and first."""
    opening = " ".join(f"word{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40))
    prompt = build_planning_prompt(
        f"{opening} and finally hypersonic",
        _SOURCE,
        (_MAPPING,),
        provider.capabilities,
        max_queries=3,
        model_profile="default",
        max_terms_per_query=_LIMITS.max_terms_per_query,
    )
    first = parse_plan(LocalModel().answer(prompt), source_id=_SOURCE.id)[0]
    assert first.optional_terms[0] == "hypersonic"
    assert len(first.optional_terms) == 42
