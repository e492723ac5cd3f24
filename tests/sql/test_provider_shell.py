"""SqlSearchProvider: the flow every SQL engine shares, over a scripted engine part."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import attrs
import pytest
from sqlalchemy.dialects import sqlite

from esra.core._config.mapping import Mapping, Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import Strategy
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError, UnvalidatedQueryError
from esra.core.ports import SearchProvider, StatementRenderer, TextIndexKind
from esra.sql import (
    BuiltStatement,
    CompiledStatementCache,
    EngineTraits,
    FullTextClause,
    SqlSearchProvider,
    StatementBuilder,
    TermShape,
    TextTarget,
    TimeBudget,
)
from tests.sql.conftest import HOSTILE_MAPPING, PlainFullText, issue

_P = ProviderErrorCode
_TRAITS = EngineTraits(name="scripted", text_index=TextIndexKind.SQLITE_FTS5)


class _BrokenFullText(PlainFullText):
    """A full-text strategy whose clause cannot be built (text that must never leak)."""

    def clause(self, target: TextTarget, shape: TermShape) -> FullTextClause:
        msg = "driver-ish detail: relation docs_secret"
        raise RuntimeError(msg)


def _builder(fulltext: PlainFullText | None = None) -> StatementBuilder:
    return StatementBuilder(
        sqlite.dialect(paramstyle="named"),
        fulltext or PlainFullText(),
        cache=CompiledStatementCache(0),
    )


@attrs.define
class _ScriptedEngine:
    """An engine part that answers from a script and records what the shell asked of it."""

    traits: EngineTraits = _TRAITS
    builder: StatementBuilder | None = attrs.field(factory=_builder)
    rows: Sequence[Sequence[Any]] = ()
    ready: Sequence[bool] = ()
    readiness_error: Exception | None = None
    runs: list[tuple[BuiltStatement, ValidatedQuery, TimeBudget]] = attrs.field(factory=list)
    checked: list[tuple[Mapping, ...]] = attrs.field(factory=list)

    async def statement_builder(self) -> StatementBuilder:
        if self.builder is None:
            self.builder = _builder()  # what an engine learns on first connect
        return self.builder

    async def run(
        self, built: BuiltStatement, query: ValidatedQuery, budget: TimeBudget
    ) -> Sequence[Sequence[Any]]:
        self.runs.append((built, query, budget))
        return self.rows

    async def readiness(self, mappings: Sequence[Mapping]) -> Sequence[bool]:
        self.checked.append(tuple(mappings))
        if self.readiness_error is not None:
            raise self.readiness_error
        return self.ready


def _shell(
    engine: _ScriptedEngine, *, mappings: Sequence[Mapping] = (), max_rows: int = 200
) -> SqlSearchProvider[_ScriptedEngine]:
    return SqlSearchProvider(engine, mappings=mappings, max_rows=max_rows)


def test_capabilities_are_every_strategy_and_operator_with_the_engines_index() -> None:
    """The shell states all six strategies, all operators, the traits' kind and its cap."""
    provider = _shell(_ScriptedEngine(), max_rows=37)
    assert isinstance(provider, SearchProvider)
    assert isinstance(provider, StatementRenderer)
    caps = provider.capabilities
    assert caps.strategies == frozenset(Strategy)
    assert caps.operators == frozenset(Operator)
    assert caps.text_index is TextIndexKind.SQLITE_FTS5
    assert caps.max_rows == 37


async def test_an_unvalidated_query_never_reaches_the_engine() -> None:
    """A forged ValidatedQuery is refused before the engine is asked anything."""
    engine = _ScriptedEngine()
    with pytest.raises(UnvalidatedQueryError):
        await _shell(engine).execute(object.__new__(ValidatedQuery), timeout_s=5)
    assert engine.runs == []


async def test_the_engine_runs_the_built_statement_within_the_callers_budget() -> None:
    """The engine gets the builder's statement for the query and the caller's timeout."""
    engine = _ScriptedEngine()
    query = issue()
    before = time.monotonic()
    await _shell(engine).execute(query, timeout_s=3.0)
    after = time.monotonic()
    [(built, ran, budget)] = engine.runs
    expected = _builder().build(query)
    assert (built.sql, built.params) == (expected.sql, expected.params)
    assert ran is query
    assert budget.seconds == 3.0
    assert before + 3.0 <= budget.deadline <= after + 3.0


async def test_driver_rows_come_back_keyed_by_business_field() -> None:
    """Key, score and projected columns map to a ResultRow; datetimes stay datetimes."""
    stamp = datetime(2024, 5, 6, 7, 8, 9)
    engine = _ScriptedEngine(rows=[(7, 2.5, "Title", "Body", stamp)])
    [row] = await _shell(engine).execute(issue(), timeout_s=5)
    assert row.key == "7"
    assert row.score == 2.5
    assert row.values == {"title": "Title", "body": "Body", "published": stamp}


async def test_an_engine_returning_datetimes_for_dates_gets_dates_back() -> None:
    """With ``dates_as_datetimes`` a DATE field's datetime becomes its date; others stay."""
    traits = attrs.evolve(_TRAITS, dates_as_datetimes=True)
    stamp = datetime(2024, 5, 6, 7, 8, 9)
    engine = _ScriptedEngine(traits=traits, rows=[("k", 1.0, stamp, "Body", stamp)])
    [row] = await _shell(engine).execute(issue(), timeout_s=5)
    assert row.values["published"] == date(2024, 5, 6)
    assert row.values["title"] == stamp  # a TEXT field is the driver's value, untouched


async def test_terms_without_a_text_index_are_refused_where_the_engine_needs_one() -> None:
    """``terms_need_text_index``: TEXT_INDEX_UNAVAILABLE before building or running."""
    unindexed = attrs.evolve(HOSTILE_MAPPING, text_index=None)
    needing = _ScriptedEngine(traits=attrs.evolve(_TRAITS, terms_need_text_index=True))
    with pytest.raises(ProviderError) as raised:
        await _shell(needing).execute(issue(unindexed), timeout_s=5)
    assert raised.value.code is _P.TEXT_INDEX_UNAVAILABLE
    assert needing.runs == []
    # Without terms there is nothing to match: the query runs.
    await _shell(needing).execute(issue(unindexed, optional_terms=()), timeout_s=5)
    assert len(needing.runs) == 1
    # An engine that finds its index itself is left to do so.
    finding = _ScriptedEngine()
    await _shell(finding).execute(issue(unindexed), timeout_s=5)
    assert len(finding.runs) == 1


async def test_a_statement_that_cannot_be_built_is_unknown_without_its_text() -> None:
    """A build failure leaves as UNKNOWN; its message stays out of the error."""
    engine = _ScriptedEngine(builder=_builder(_BrokenFullText()))
    with pytest.raises(ProviderError) as raised:
        await _shell(engine).execute(issue(), timeout_s=5)
    assert raised.value.code is _P.UNKNOWN
    assert "docs_secret" not in str(raised.value)
    assert engine.runs == []


async def test_a_builder_learnt_on_first_use_is_rendered_only_afterwards() -> None:
    """``builder`` is None and rendering UNKNOWN until the engine has its builder."""
    engine = _ScriptedEngine(builder=None)
    provider = _shell(engine)
    query = issue()
    unknown = provider.builder
    assert unknown is None
    with pytest.raises(ProviderError) as raised:
        provider.render_statement(query)
    assert raised.value.code is _P.UNKNOWN
    await provider.execute(query, timeout_s=5)
    learnt = provider.builder
    assert learnt is not None
    rendered = provider.render_statement(query)
    assert rendered == learnt.render(query)
    assert rendered.text == learnt.build(query).sql


@pytest.mark.parametrize(
    ("ready", "expected"),
    [
        ((True, True), SourceHealth.HEALTHY),
        ((True, False), SourceHealth.DEGRADED),
        ((False, False), SourceHealth.UNAVAILABLE),
        ((), SourceHealth.HEALTHY),
    ],
)
async def test_health_is_read_from_which_mappings_are_ready(
    ready: tuple[bool, ...], expected: SourceHealth
) -> None:
    """All ready: HEALTHY; some: DEGRADED; none: UNAVAILABLE; the source's mappings asked."""
    mappings = (HOSTILE_MAPPING, attrs.evolve(HOSTILE_MAPPING, id="m-other"))
    engine = _ScriptedEngine(ready=ready)
    assert await _shell(engine, mappings=mappings).health() is expected
    assert engine.checked == [mappings]


@pytest.mark.parametrize(
    "error", [ProviderError(_P.CONNECTION_REFUSED), OSError("network is unreachable")]
)
async def test_health_never_raises(error: Exception) -> None:
    """A source that cannot be checked at all is UNAVAILABLE, whatever the engine raised."""
    engine = _ScriptedEngine(readiness_error=error)
    assert await _shell(engine).health() is SourceHealth.UNAVAILABLE
