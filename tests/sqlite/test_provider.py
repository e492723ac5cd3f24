"""Tests for SqliteFts5Provider beyond the shared contract: engine-specific behaviour."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest

from esra.core._config.mapping import FieldType, Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.ports import SearchProvider, TextIndexKind
from esra.core.testing.contract import (
    CONTRACT_COLUMNS,
    CONTRACT_MAPPING,
    CONTRACT_ROWS,
    contract_query,
)
from esra.sqlite import SqliteFts5Provider, open_readonly
from esra.sqlite._errors import classify
from esra.sqlite._provider import _Execution
from tests.sqlite.conftest import seed_database, table_counts

_INFINITE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"


def _acme(strategy: Strategy = Strategy.RECENT, **overrides: Any) -> ValidatedQuery:
    # Issued directly to reach term-less and odd shapes; the values are all benign.
    values: dict[str, Any] = {
        "query_id": "src-contract#1",
        "source_id": CONTRACT_MAPPING.source_id,
        "mapping": CONTRACT_MAPPING,
        "strategy": strategy,
        "required_terms": (),
        "optional_terms": (),
        "excluded_terms": (),
        "phrases": (),
        "filters": (),
        "record_filters": (ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),),
        "projection": (ProjectedField("title", "art_title"),),
        "freshness": ProjectedField("published", "art_published"),
        "row_limit": 50,
    }
    values.update(overrides)
    return _issue(**values)


def test_is_a_search_provider_with_explicit_capabilities(
    provider: SqliteFts5Provider,
) -> None:
    """All six strategies, all seven operators, the FTS5 index kind."""
    assert isinstance(provider, SearchProvider)
    caps = provider.capabilities
    assert caps.strategies == frozenset(Strategy)
    assert caps.operators == frozenset(Operator)
    assert caps.text_index is TextIndexKind.SQLITE_FTS5


async def test_recent_orders_by_freshness_then_key(provider: SqliteFts5Provider) -> None:
    """RECENT without terms returns the caller's rows newest first (stable by key)."""
    rows = await provider.execute(_acme(), timeout_s=5)
    acme = [r for r in CONTRACT_ROWS if r["art_org"] == "acme"]
    expected = sorted(acme, key=lambda r: str(r["art_key"]))
    expected.sort(key=lambda r: str(r["art_published"]), reverse=True)
    assert [r.key for r in rows] == [str(r["art_key"]) for r in expected]
    assert {r.score for r in rows} == {0.0}


async def test_recent_with_terms_still_orders_by_freshness(
    provider: SqliteFts5Provider,
) -> None:
    """RECENT with terms keeps only matches, newest first."""
    rows = await provider.execute(_acme(optional_terms=("inverter",)), timeout_s=5)
    assert [r.key for r in rows] == ["a09", "a02", "a07", "a05"]


async def test_statement_is_compiled_once_per_shape(provider: SqliteFts5Provider) -> None:
    """Repeated executions of one shape reuse the cached text."""
    for term in ("solar", "inverter", "budget"):
        await provider.execute(_acme(Strategy.KEYWORD, optional_terms=(term,)), timeout_s=5)
    info = provider.builder.cache.info()
    assert (info.misses, info.hits) == (1, 2)


async def test_schema_qualified_mapping_searches(contract_db: Path) -> None:
    """A mapping naming its schema (``main``) is searched schema-qualified."""
    mapping = attrs.evolve(CONTRACT_MAPPING, schema="main")
    provider = SqliteFts5Provider(contract_db, mappings=(mapping,))
    try:
        rows = await provider.execute(
            _acme(Strategy.KEYWORD, mapping=mapping, phrases=("solar panel",)), timeout_s=5
        )
        assert {r.key for r in rows} == {"a07", "a01"}
        assert await provider.health() is SourceHealth.HEALTHY
    finally:
        provider.close()


@pytest.mark.parametrize("term", ["\udcff\udc80", "a\x00b", "\x00", '"' * 9, "\\", "'"])
async def test_undecodable_and_control_content_stays_literal(
    provider: SqliteFts5Provider, term: str
) -> None:
    """Lone surrogates, NUL and quote runs neither fail nor match anything."""
    rows = await provider.execute(_acme(Strategy.KEYWORD, required_terms=(term,)), timeout_s=5)
    assert list(rows) == []


async def test_deadline_is_enforced_by_the_progress_handler(contract_db: Path) -> None:
    """A statement past its deadline is interrupted and classified TIMEOUT."""
    provider = SqliteFts5Provider(contract_db, progress_interval=1)
    try:
        with pytest.raises(ProviderError) as raised:
            await provider.execute(_acme(Strategy.KEYWORD, optional_terms=("solar",)), timeout_s=0)
        assert raised.value.code is ProviderErrorCode.TIMEOUT
        # The connection went back to the pool in working order.
        rows = await provider.execute(_acme(), timeout_s=5)
        assert rows
    finally:
        provider.close()


def test_execution_cancel_interrupts_a_running_statement(contract_db: Path) -> None:
    """cancel() interrupts a statement that would never end; it is classified CANCELLED."""
    connection = open_readonly(contract_db)
    execution = _Execution(deadline=float("inf"))
    started = threading.Event()
    outcome: list[BaseException] = []

    def work() -> None:
        execution.attach(connection)

        def progress() -> int:
            started.set()
            return execution.progress()

        connection.set_progress_handler(progress, 100)
        try:
            connection.execute(_INFINITE).fetchall()
        except sqlite3.Error as exc:
            outcome.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    assert started.wait(10)
    execution.cancel()
    worker.join(10)
    connection.close()
    assert len(outcome) == 1
    code = classify(outcome[0], text_index=None, state=execution.state)
    assert code is ProviderErrorCode.CANCELLED


def test_execution_deadline_interrupts_a_running_statement(contract_db: Path) -> None:
    """The progress handler stops a never-ending statement at its deadline: TIMEOUT."""
    connection = open_readonly(contract_db)
    execution = _Execution(deadline=0.0)
    connection.set_progress_handler(execution.progress, 100)
    with pytest.raises(sqlite3.OperationalError) as raised:
        connection.execute(_INFINITE).fetchall()
    connection.close()
    code = classify(raised.value, text_index=None, state=execution.state)
    assert code is ProviderErrorCode.TIMEOUT


async def test_cancellation_propagates_and_frees_the_connection(contract_db: Path) -> None:
    """Cancelling the awaiting task re-raises CancelledError; the pool stays usable."""
    provider = SqliteFts5Provider(contract_db, pool_size=1)
    held = provider._engine._pool.acquire(5)  # the only slot: the execution has to wait
    try:
        task = asyncio.create_task(provider.execute(_acme(), timeout_s=30))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        provider._engine._pool.release(held)
    try:
        rows = await provider.execute(_acme(), timeout_s=10)
        assert rows
    finally:
        provider.close()


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO contract_articles (art_key) VALUES ('x')",
        "UPDATE contract_articles SET art_title = 'x'",
        "DELETE FROM contract_articles",
        "DROP TABLE contract_articles",
        "CREATE TABLE intruder (x)",
        "INSERT INTO contract_articles_fts (contract_articles_fts) VALUES ('delete-all')",
        "PRAGMA query_only = 0",
        "ATTACH DATABASE ':memory:' AS elsewhere",
        "BEGIN IMMEDIATE",
    ],
)
async def test_the_providers_connection_cannot_write(
    provider: SqliteFts5Provider, contract_db: Path, statement: str
) -> None:
    """Any write over a pooled connection fails as PERMISSION_DENIED; nothing changes."""
    await provider.execute(_acme(), timeout_s=5)  # the pool now holds a used connection
    before = table_counts(contract_db)
    slot = provider._engine._pool.acquire(5)
    connection = slot.connection()
    try:
        with pytest.raises(sqlite3.Error) as raised:
            connection.execute(statement)
        assert classify(raised.value, text_index=None) is ProviderErrorCode.PERMISSION_DENIED
        # Without the authorizer, query_only and the read-only file handle still refuse.
        connection.set_authorizer(None)
        if statement.startswith(("INSERT", "UPDATE", "DELETE", "DROP", "CREATE")):
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                connection.execute(statement)
    finally:
        slot.close()  # its authorizer was removed: never hand it back to the pool
    assert table_counts(contract_db) == before


async def test_missing_text_index_is_classified(tmp_path: Path) -> None:
    """A relation without its FTS table fails as TEXT_INDEX_UNAVAILABLE."""
    path = tmp_path / "noindex.db"
    seed_database(
        path,
        CONTRACT_MAPPING,
        CONTRACT_COLUMNS,
        CONTRACT_ROWS,
        with_index=False,
    )
    provider = SqliteFts5Provider(path, mappings=(CONTRACT_MAPPING,))
    try:
        with pytest.raises(ProviderError) as raised:
            await provider.execute(_acme(Strategy.KEYWORD, optional_terms=("x",)), timeout_s=5)
        assert raised.value.code is ProviderErrorCode.TEXT_INDEX_UNAVAILABLE
        assert await provider.health() is SourceHealth.UNAVAILABLE
    finally:
        provider.close()


async def test_mapping_without_text_index_is_classified(provider: SqliteFts5Provider) -> None:
    """A mapping with no text index configured cannot run a term query."""
    mapping = attrs.evolve(CONTRACT_MAPPING, text_index=None)
    query = _acme(Strategy.KEYWORD, mapping=mapping, optional_terms=("solar",))
    with pytest.raises(ProviderError) as raised:
        await provider.execute(query, timeout_s=5)
    assert raised.value.code is ProviderErrorCode.TEXT_INDEX_UNAVAILABLE


async def test_unopenable_database_is_connection_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A database that cannot be opened is CONNECTION_REFUSED; the driver text is logged only."""
    provider = SqliteFts5Provider(tmp_path / "absent.db", mappings=(CONTRACT_MAPPING,))
    with caplog.at_level(logging.WARNING, logger="esra.sqlite"):
        with pytest.raises(ProviderError) as raised:
            await provider.execute(_acme(), timeout_s=5)
        assert await provider.health() is SourceHealth.UNAVAILABLE
    provider.close()
    assert raised.value.code is ProviderErrorCode.CONNECTION_REFUSED
    assert str(raised.value) == "Provider error: CONNECTION_REFUSED"
    assert "unable to open" in caplog.text
    assert not (tmp_path / "absent.db").exists()


async def test_error_message_carries_no_driver_text(
    provider: SqliteFts5Provider, caplog: pytest.LogCaptureFixture
) -> None:
    """A missing relation's name reaches the log, never the raised error."""
    mapping = attrs.evolve(CONTRACT_MAPPING, relation="secret_relation_name")
    with (
        caplog.at_level(logging.WARNING, logger="esra.sqlite"),
        pytest.raises(ProviderError) as raised,
    ):
        await provider.execute(_acme(mapping=mapping), timeout_s=5)
    assert raised.value.code is ProviderErrorCode.RELATION_NOT_FOUND
    assert "secret_relation_name" not in str(raised.value)
    assert "secret_relation_name" in caplog.text


async def test_health_reports_degraded_when_some_mappings_lack_tables(
    contract_db: Path,
) -> None:
    """One usable mapping and one without its relation: DEGRADED."""
    broken = attrs.evolve(CONTRACT_MAPPING, id="broken", relation="nowhere")
    provider = SqliteFts5Provider(contract_db, mappings=(CONTRACT_MAPPING, broken))
    try:
        assert await provider.health() is SourceHealth.DEGRADED
    finally:
        provider.close()


async def test_health_is_healthy_for_the_seeded_database(provider: SqliteFts5Provider) -> None:
    """The relation and its FTS5 table exist: HEALTHY."""
    assert await provider.health() is SourceHealth.HEALTHY


async def test_validated_queries_run_end_to_end(provider: SqliteFts5Provider) -> None:
    """A query issued by the real validator runs and honours its record filter."""
    query = contract_query(provider, phrases=("solar panel",), claims={"org": "globex"})
    rows = await provider.execute(query, timeout_s=5)
    assert [r.key for r in rows] == ["a04"]
