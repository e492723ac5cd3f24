"""PostgresProvider beyond the shared contract: read-only, limits, cancellation, failures.

Every classification here is provoked for real against the live server; the template codes
are provoked with psycopg's connect replaced by a tripwire, proving no socket was opened.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import psycopg
import pytest
from psycopg import sql
from psycopg.pq import TransactionStatus

from esra.core._admin.secrets import InMemorySecretVault
from esra.core._config.mapping import FieldType, Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.ports import SearchProvider, TextIndexKind
from esra.core.testing import InMemorySecretStore
from esra.core.testing.contract import (
    CONTRACT_COLUMNS,
    CONTRACT_MAPPING,
    CONTRACT_ROWS,
    contract_query,
)
from esra.postgres import PostgresProvider
from esra.sql import BuiltStatement
from tests.postgres.conftest import (
    admin,
    host_port,
    make_provider,
    scan_nodes,
    seed_contract,
    seed_table,
    table_counts,
)

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

_P = ProviderErrorCode


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


@pytest.fixture
def seeded(pg_dsn: str, pg_schema: str) -> str:
    """The contract dataset in the test's schema; returns the schema."""
    seed_contract(pg_dsn, pg_schema)
    return pg_schema


@pytest.fixture
async def provider(pg_dsn: str, seeded: str) -> AsyncIterator[PostgresProvider]:
    """A provider over the seeded schema, closed after the test."""
    provider = make_provider(pg_dsn, seeded)
    yield provider
    await provider.close()


@pytest.fixture
def role(pg_dsn: str, pg_schema: str) -> Iterator[str]:
    """A throwaway login role with USAGE on the schema but no SELECT on anything."""
    name = f"esra_test_pg_{uuid.uuid4().hex[:10]}"
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(pg_schema), sql.Identifier(name)
            )
        )
    yield name
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _as_user(dsn: str, user: str) -> str:
    host, port = host_port(dsn)
    database = dsn.rsplit("/", 1)[-1]
    return f"postgresql://{user}@{host}:{port}/{database}"


async def _code(provider: PostgresProvider, query: ValidatedQuery, timeout_s: float = 10) -> _P:
    with pytest.raises(ProviderError) as raised:
        await provider.execute(query, timeout_s=timeout_s)
    code = raised.value.code
    assert isinstance(code, _P)
    return code


async def _run_raw(provider: PostgresProvider, statement: str) -> list[Any]:
    """Run arbitrary text through the provider's own execution path (transaction, limits)."""
    query = _acme()
    built = BuiltStatement(sql=statement, params={}, columns=())
    pool = await provider._engine._ensure_pool(10)
    loop = asyncio.get_running_loop()
    async with pool.connection() as conn:
        return await provider._engine._run(conn, built, query, _state(), loop.time() + 10)


def _state() -> Any:
    from esra.postgres._errors import ExecutionState

    return ExecutionState()


def test_is_a_search_provider_with_explicit_capabilities(pg_dsn: str) -> None:
    """All six strategies, all seven operators, the tsvector index kind; nothing connects."""
    provider = make_provider(pg_dsn, "public")
    assert isinstance(provider, SearchProvider)
    caps = provider.capabilities
    assert caps.strategies == frozenset(Strategy)
    assert caps.operators == frozenset(Operator)
    assert caps.text_index is TextIndexKind.POSTGRES_TSVECTOR
    assert provider._engine._pool is None


async def test_recent_orders_by_freshness_then_key(provider: PostgresProvider) -> None:
    """RECENT without terms returns the caller's rows newest first."""
    rows = await provider.execute(_acme(), timeout_s=5)
    acme = [r for r in CONTRACT_ROWS if r["art_org"] == "acme"]
    expected = sorted(acme, key=lambda r: str(r["art_key"]))
    expected.sort(key=lambda r: str(r["art_published"]), reverse=True)
    assert [r.key for r in rows] == [str(r["art_key"]) for r in expected]
    assert {r.score for r in rows} == {0.0}


async def test_statement_is_compiled_once_per_shape(provider: PostgresProvider) -> None:
    """Repeated executions of one shape reuse the cached text."""
    for term in ("solar", "inverter", "budget"):
        await provider.execute(_acme(Strategy.KEYWORD, optional_terms=(term,)), timeout_s=5)
    info = provider.builder.cache.info()
    assert (info.misses, info.hits) == (1, 2)


async def test_excluded_terms_only(provider: PostgresProvider) -> None:
    """RECENT with excluded terms only keeps every row not matching them."""
    rows = await provider.execute(_acme(excluded_terms=("solar", "inverter")), timeout_s=5)
    assert {r.key for r in rows} == {"a06", "a08", "a10"}


async def test_schema_qualified_mapping_searches(pg_dsn: str, seeded: str) -> None:
    """A mapping naming its schema is searched schema-qualified, whatever the search path."""
    mapping = attrs.evolve(CONTRACT_MAPPING, schema=seeded)
    provider = make_provider(pg_dsn, "public", mappings=(mapping,))
    try:
        rows = await provider.execute(
            _acme(Strategy.KEYWORD, mapping=mapping, phrases=("solar panel",)), timeout_s=5
        )
        assert {r.key for r in rows} == {"a07", "a01"}
        assert await provider.health() is SourceHealth.HEALTHY
    finally:
        await provider.close()


async def test_english_configuration_stems(pg_dsn: str, pg_schema: str) -> None:
    """With 'english' (the default) terms are stemmed: 'inspecting' finds 'inspect'."""
    seed_table(
        pg_dsn, pg_schema, CONTRACT_MAPPING, CONTRACT_COLUMNS, CONTRACT_ROWS, config="english"
    )
    provider = make_provider(pg_dsn, pg_schema, config="english")
    try:
        assert provider.text_search_config == "english"
        rows = await provider.execute(
            _acme(Strategy.KEYWORD, required_terms=("inspecting",)), timeout_s=5
        )
        assert {r.key for r in rows} == {"a07", "a05"}
    finally:
        await provider.close()


@pytest.mark.parametrize("term", ["\udcff\udc80", "a\x00b", "\x00", '"' * 9, "\\", "'", "&|!"])
async def test_undecodable_and_control_content_stays_literal(
    provider: PostgresProvider, term: str
) -> None:
    """Lone surrogates, NUL, quote runs and tsquery operators neither fail nor match."""
    rows = await provider.execute(_acme(Strategy.KEYWORD, required_terms=(term,)), timeout_s=5)
    assert list(rows) == []


async def test_every_execution_is_read_only_with_its_limits(provider: PostgresProvider) -> None:
    """Inside an execution: read-only transaction, the timeout left, and a search path of
    ``pg_catalog`` alone (no schema anyone may CREATE in: test_pg_search_path_shadowing)."""
    rows = await _run_raw(
        provider,
        "SELECT current_setting('transaction_read_only'), "
        "current_setting('statement_timeout'), current_setting('search_path')",
    )
    read_only, timeout, path = rows[0]
    assert read_only == "on"
    assert timeout.endswith("s") or timeout.endswith("ms")
    assert path == "pg_catalog, pg_temp"


async def test_an_execution_is_read_only_even_where_the_session_may_write(
    seeded: str, provider: PostgresProvider
) -> None:
    """The execution makes its own transaction read-only: a session whose default allows
    writes (a pooler's server connection that never saw the pool's setting, say) still
    cannot write through it, and the limits end with the execution."""
    query = _acme()
    loop = asyncio.get_running_loop()
    pool = await provider._engine._ensure_pool(10)
    settings = (
        "SELECT current_setting('transaction_read_only'), "
        "current_setting('statement_timeout'), current_setting('search_path')"
    )
    async with pool.connection() as conn:
        await conn.execute(b"SET default_transaction_read_only = off")
        try:
            before = await (await conn.execute(settings)).fetchone()
            assert before is not None
            assert before[0] == "off"

            async def run(statement: str) -> list[Any]:
                built = BuiltStatement(sql=statement, params={}, columns=())
                return await provider._engine._run(conn, built, query, _state(), loop.time() + 10)

            ((read_only,),) = await run("SELECT current_setting('transaction_read_only')")
            assert read_only == "on"
            with pytest.raises(ProviderError) as raised:
                await run(f"CREATE TABLE {seeded}.intruder (x int)")
            assert raised.value.code is _P.PERMISSION_DENIED
            # Nothing of the execution outlives it on the session.
            assert await (await conn.execute(settings)).fetchone() == before
            assert conn.info.transaction_status is TransactionStatus.IDLE
        finally:
            await conn.execute(b"SET default_transaction_read_only = on")


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO contract_articles (art_key) VALUES ('x')",
        "UPDATE contract_articles SET art_title = 'x'",
        "DELETE FROM contract_articles",
        "DROP TABLE contract_articles",
        "CREATE TABLE intruder (x int)",
        "SELECT nextval('intruder_seq')",
    ],
)
async def test_the_providers_connection_cannot_write(
    pg_dsn: str, seeded: str, provider: PostgresProvider, statement: str
) -> None:
    """A write over the provider's own connection fails: in its transaction and outside it.

    (In the execution's transaction the search path is ``pg_catalog`` alone: the relation is
    named with its schema there, as the provider's statements name it.)"""
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE SEQUENCE {}").format(sql.Identifier(seeded, "intruder_seq")))
    await provider.execute(_acme(), timeout_s=5)  # the pool now holds a used connection
    before = table_counts(pg_dsn, seeded)
    with pytest.raises(ProviderError) as raised:
        await _run_raw(provider, _in_schema(statement, seeded))
    assert raised.value.code is _P.PERMISSION_DENIED
    # Outside any transaction of ours, the connection's default is read-only too.
    assert provider._engine._pool is not None
    async with provider._engine._pool.connection() as conn:
        await conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(seeded)))
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            await conn.execute(statement)
    assert table_counts(pg_dsn, seeded) == before


def _in_schema(statement: str, schema: str) -> str:
    """``statement`` with its relations named in ``schema``."""
    quoted = sql.Identifier(schema).as_string()
    for name in ("contract_articles", "intruder_seq", "intruder"):
        statement = re.sub(rf"(?<![\w.]){name}\b", f"{quoted}.{name}", statement)
    return statement


async def test_statement_timeout_is_classified_timeout(
    pg_dsn: str, seeded: str, provider: PostgresProvider
) -> None:
    """A statement past its timeout is stopped by the server: TIMEOUT; the pool recovers."""
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL("CREATE VIEW {} AS SELECT a.* FROM {} a, pg_sleep(5) s").format(
                sql.Identifier(seeded, "slow_articles"),
                sql.Identifier(seeded, "contract_articles"),
            )
        )
    slow = attrs.evolve(CONTRACT_MAPPING, relation="slow_articles")
    # The view sleeps 5 s and then has rows: TIMEOUT is only the answer if the statement
    # was stopped at its 0.3 s timeout (no wall clock asserted).
    assert await _code(provider, _acme(mapping=slow), timeout_s=0.3) is _P.TIMEOUT
    assert await provider.execute(_acme(), timeout_s=5)


async def test_cancelling_the_task_cancels_the_server_query(
    pg_dsn: str, seeded: str, provider: PostgresProvider
) -> None:
    """Task cancellation re-raises CancelledError, stops the server query, frees the pool."""
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL("CREATE VIEW {} AS SELECT a.* FROM {} a, pg_sleep(30) s").format(
                sql.Identifier(seeded, "slow_articles"),
                sql.Identifier(seeded, "contract_articles"),
            )
        )
    slow = attrs.evolve(CONTRACT_MAPPING, relation="slow_articles")
    task = asyncio.create_task(provider.execute(_acme(mapping=slow), timeout_s=60))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if _sleeping(pg_dsn):
            break
    assert _sleeping(pg_dsn)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _sleeping(pg_dsn)
    assert await provider.execute(_acme(), timeout_s=5)


def _sleeping(dsn: str) -> bool:
    with admin(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'esra' "
            "AND state = 'active' AND query LIKE '%%slow_articles%%'"
        ).fetchone()
    return bool(row and int(str(row[0])))


async def test_a_cancelled_statement_is_classified_cancelled(
    pg_dsn: str, seeded: str, provider: PostgresProvider
) -> None:
    """A statement cancelled on the server before its deadline (pg_cancel_backend): CANCELLED."""
    with admin(pg_dsn) as conn:
        conn.execute(
            sql.SQL("CREATE VIEW {} AS SELECT a.* FROM {} a, pg_sleep(30) s").format(
                sql.Identifier(seeded, "slow_articles"),
                sql.Identifier(seeded, "contract_articles"),
            )
        )
    slow = attrs.evolve(CONTRACT_MAPPING, relation="slow_articles")

    async def cancel_from_outside() -> None:
        for _ in range(100):
            await asyncio.sleep(0.05)
            if _sleeping(pg_dsn):
                break
        with admin(pg_dsn) as conn:
            conn.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'esra' AND query LIKE '%%slow_articles%%'"
            )

    canceller = asyncio.create_task(cancel_from_outside())
    assert await _code(provider, _acme(mapping=slow), timeout_s=60) is _P.CANCELLED
    await canceller


async def test_connection_refused(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing listens on 127.0.0.1:1: CONNECTION_REFUSED, driver text in the log only."""
    provider = PostgresProvider(
        tenant_id="t",
        connection="postgresql://esra@127.0.0.1:1/test",
        secrets=InMemorySecretStore(),
        allowlist=_allow("t", "127.0.0.1", 1),
        mappings=(CONTRACT_MAPPING,),
    )
    with caplog.at_level(logging.WARNING, logger="esra.postgres"):
        assert await _code(provider, _acme()) is _P.CONNECTION_REFUSED
        assert await provider.health() is SourceHealth.UNAVAILABLE
    await provider.close()
    assert "Connection refused" in caplog.text


def _allow(tenant: str, host: str, port: int) -> Any:
    from esra.core.testing import StaticHostAllowlist

    return StaticHostAllowlist([(tenant, host, port)])


async def test_auth_failed_for_a_role_that_may_not_log_in(
    pg_dsn: str, seeded: str, role: str
) -> None:
    """A role without LOGIN (this server trusts passwords) is refused: AUTH_FAILED."""
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(role)))
    provider = make_provider(pg_dsn, seeded, connection=_as_user(pg_dsn, role))
    assert await _code(provider, _acme()) is _P.AUTH_FAILED
    await provider.close()


async def test_auth_failed_for_a_wrong_secret_user(pg_dsn: str, seeded: str) -> None:
    """A user name resolved from a secret that names no role: AUTH_FAILED."""
    secrets = InMemorySecretStore({("t-contract", "pg-user"): "esra_no_such_role"})
    # The ':' inside a user-name placeholder is percent-encoded, or the URL splits there.
    template = _as_user(pg_dsn, "${secret%3Apg-user}")
    provider = make_provider(pg_dsn, seeded, connection=template, secrets=secrets)
    assert await _code(provider, _acme()) is _P.AUTH_FAILED
    await provider.close()


async def test_a_rotated_secret_is_used_by_the_next_connection_the_pool_opens(
    pg_dsn: str, seeded: str, role: str
) -> None:
    """Rotating a stored secret needs no reopened provider: the pool resolves the template
    again for every connection it opens (the user name is the secret here, since this
    server trusts passwords)."""
    second = f"{role}_next"
    with admin(pg_dsn) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(second)))
    vault = InMemorySecretVault()
    await vault.put("t-contract", "pg-user", role)
    template = _as_user(pg_dsn, "${secret%3Apg-user}")
    provider = make_provider(pg_dsn, seeded, connection=template, secrets=vault, pool_size=1)
    try:
        assert await _run_raw(provider, "SELECT current_user") == [(role,)]
        await vault.put("t-contract", "pg-user", second)
        with admin(pg_dsn) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
        pool = await provider._engine._ensure_pool(10)
        await pool.check()  # the pool replaces the connection the server closed
        assert await _run_raw(provider, "SELECT current_user") == [(second,)]
    finally:
        await provider.close()
        with admin(pg_dsn) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(second)))


async def test_permission_denied_without_select(pg_dsn: str, seeded: str, role: str) -> None:
    """A role without SELECT on the relation: PERMISSION_DENIED."""
    provider = make_provider(pg_dsn, seeded, connection=_as_user(pg_dsn, role))
    try:
        assert await _code(provider, _acme()) is _P.PERMISSION_DENIED
        with admin(pg_dsn) as conn:
            conn.execute(
                sql.SQL("GRANT SELECT ON {} TO {}").format(
                    sql.Identifier(seeded, "contract_articles"), sql.Identifier(role)
                )
            )
        assert await provider.execute(_acme(), timeout_s=5)
    finally:
        await provider.close()


async def test_relation_not_found(provider: PostgresProvider) -> None:
    """A mapping whose relation does not exist: RELATION_NOT_FOUND; its name only logged."""
    mapping = attrs.evolve(CONTRACT_MAPPING, relation="secret_relation_name")
    with pytest.raises(ProviderError) as raised:
        await provider.execute(_acme(mapping=mapping), timeout_s=5)
    assert raised.value.code is _P.RELATION_NOT_FOUND
    assert "secret_relation_name" not in str(raised.value)


async def test_missing_schema_is_relation_not_found(provider: PostgresProvider) -> None:
    """A mapping naming a schema that does not exist: RELATION_NOT_FOUND."""
    mapping = attrs.evolve(CONTRACT_MAPPING, schema="esra_no_such_schema")
    assert await _code(provider, _acme(mapping=mapping)) is _P.RELATION_NOT_FOUND


async def test_missing_column_is_relation_not_found(provider: PostgresProvider) -> None:
    """A configured column the relation lacks (not the text index): RELATION_NOT_FOUND."""
    query = _acme(projection=(ProjectedField("title", "no_such_column"),))
    assert await _code(provider, query) is _P.RELATION_NOT_FOUND


async def test_missing_text_index_is_classified(pg_dsn: str, pg_schema: str) -> None:
    """A relation without its tsvector column: TEXT_INDEX_UNAVAILABLE; health UNAVAILABLE."""
    seed_table(
        pg_dsn, pg_schema, CONTRACT_MAPPING, CONTRACT_COLUMNS, CONTRACT_ROWS, with_index=False
    )
    provider = make_provider(pg_dsn, pg_schema)
    try:
        query = _acme(Strategy.KEYWORD, optional_terms=("solar",))
        assert await _code(provider, query) is _P.TEXT_INDEX_UNAVAILABLE
        assert await provider.health() is SourceHealth.UNAVAILABLE
        assert await provider.execute(_acme(), timeout_s=5)  # term-less still runs
    finally:
        await provider.close()


async def test_text_index_that_is_no_tsvector_is_column_not_indexed(
    pg_dsn: str, pg_schema: str
) -> None:
    """A text_index naming an ordinary text column: COLUMN_NOT_INDEXED."""
    mapping = attrs.evolve(CONTRACT_MAPPING, text_index="art_title")
    seed_table(pg_dsn, pg_schema, mapping, CONTRACT_COLUMNS, CONTRACT_ROWS, with_index=False)
    provider = make_provider(pg_dsn, pg_schema, mappings=(mapping,))
    try:
        query = _acme(Strategy.KEYWORD, mapping=mapping, optional_terms=("solar",))
        assert await _code(provider, query) is _P.COLUMN_NOT_INDEXED
        assert await provider.health() is SourceHealth.UNAVAILABLE
    finally:
        await provider.close()


async def test_unknown_text_search_configuration(pg_dsn: str, seeded: str) -> None:
    """A configured regconfig that does not exist: TEXT_INDEX_UNAVAILABLE."""
    provider = make_provider(pg_dsn, seeded, config="esra_no_such_config")
    try:
        query = _acme(Strategy.KEYWORD, optional_terms=("solar",))
        assert await _code(provider, query) is _P.TEXT_INDEX_UNAVAILABLE
    finally:
        await provider.close()


async def test_mapping_without_text_index_is_classified(provider: PostgresProvider) -> None:
    """A mapping with no text index configured cannot run a term query."""
    mapping = attrs.evolve(CONTRACT_MAPPING, text_index=None)
    query = _acme(Strategy.KEYWORD, mapping=mapping, optional_terms=("solar",))
    assert await _code(provider, query) is _P.TEXT_INDEX_UNAVAILABLE


async def test_syntax_error_through_the_execution_path(provider: PostgresProvider) -> None:
    """Malformed text reaching the server (never built by ESRA): SYNTAX_ERROR."""
    with pytest.raises(ProviderError) as raised:
        await _run_raw(provider, "SELEC 1")
    assert raised.value.code is _P.SYNTAX_ERROR
    assert await provider.execute(_acme(), timeout_s=5)


async def test_busy_pool_is_resource_exhausted(pg_dsn: str, seeded: str) -> None:
    """Every connection busy past the deadline: RESOURCE_EXHAUSTED (retryable)."""
    provider = make_provider(pg_dsn, seeded, pool_size=1)
    try:
        pool = await provider._engine._ensure_pool(5)
        async with pool.connection():
            assert await _code(provider, _acme(), timeout_s=0.2) is _P.RESOURCE_EXHAUSTED
        assert await provider.execute(_acme(), timeout_s=5)
    finally:
        await provider.close()


@pytest.mark.parametrize(
    ("template", "allowed", "expected"),
    [
        ("postgresql://esra@127.0.0.1:5432/test", False, _P.HOST_NOT_ALLOWED),
        ("postgresql://esra:${secret:absent}@127.0.0.1:5432/test", True, _P.SECRET_UNRESOLVED),
        ("mysql://esra@127.0.0.1:5432/test", True, _P.CONNECTION_TEMPLATE_INVALID),
        ("postgresql://esra@${secret:h}:5432/test", True, _P.CONNECTION_TEMPLATE_INVALID),
        ("postgresql://esra@127.0.0.1:5432/test?passfile=/x", True, _P.CONNECTION_TEMPLATE_INVALID),
        ("postgresql://esra@127.0.0.1:5432/test?options=-c", True, _P.CONNECTION_TEMPLATE_INVALID),
    ],
)
async def test_template_failures_open_no_socket(
    monkeypatch: pytest.MonkeyPatch, template: str, allowed: bool, expected: _P
) -> None:
    """Allowlist, secret and template failures are raised before any connection attempt."""

    async def tripwire(*args: object, **kwargs: object) -> None:
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", tripwire)
    provider = PostgresProvider(
        tenant_id="t",
        connection=template,
        secrets=InMemorySecretStore(),
        allowlist=_allow("t", "127.0.0.1", 5432 if allowed else 5433),
        mappings=(CONTRACT_MAPPING,),
    )
    assert await _code(provider, _acme()) is expected
    assert await provider.health() is SourceHealth.UNAVAILABLE
    await provider.close()


async def test_health(pg_dsn: str, seeded: str) -> None:
    """HEALTHY when every mapping is usable, DEGRADED when only some are."""
    broken = attrs.evolve(CONTRACT_MAPPING, id="broken", relation="nowhere")
    good = make_provider(pg_dsn, seeded)
    mixed = make_provider(pg_dsn, seeded, mappings=(CONTRACT_MAPPING, broken))
    try:
        assert await good.health() is SourceHealth.HEALTHY
        assert await mixed.health() is SourceHealth.DEGRADED
    finally:
        await good.close()
        await mixed.close()


async def test_validated_queries_run_end_to_end(provider: PostgresProvider) -> None:
    """A query issued by the real validator runs and honours its record filter."""
    query = contract_query(provider, phrases=("solar panel",), claims={"org": "globex"})
    rows = await provider.execute(query, timeout_s=5)
    assert [r.key for r in rows] == ["a04"]


async def test_closed_provider_refuses(pg_dsn: str, seeded: str) -> None:
    """After close() the pool is gone and executions fail as CANCELLED."""
    provider = make_provider(pg_dsn, seeded)
    assert await provider.execute(_acme(), timeout_s=5)
    await provider.close()
    assert await _code(provider, _acme()) is _P.CANCELLED


async def test_no_statement_is_ever_prepared_on_the_server(pg_dsn: str, seeded: str) -> None:
    """psycopg would prepare a statement after its fifth execution, and PostgreSQL then plans
    the full-text statements generically (about twice as slow); a prepared statement is also
    session state a transaction-mode PgBouncer cannot carry. One connection, many runs."""
    provider = make_provider(pg_dsn, seeded, pool_size=1)
    try:
        for _ in range(12):
            await provider.execute(_acme(Strategy.KEYWORD, optional_terms=("widget",)), timeout_s=5)
        assert provider._engine._pool is not None
        async with provider._engine._pool.connection() as conn:
            cursor = await conn.execute("SELECT count(*) FROM pg_prepared_statements")
            row = await cursor.fetchone()
    finally:
        await provider.close()
    assert row == (0,)


def test_the_collection_statistics_are_counted_once_per_statement(pg_dsn: str, seeded: str) -> None:
    """The idf statistics are one derived row; PostgreSQL pulled it up into the outer query,
    so every reference to ``n`` became a scalar subquery of its own and the whole relation
    was counted once per scored term (30 ms instead of 11 ms on 100,000 rows for three)."""
    provider = make_provider(pg_dsn, seeded)
    terms = ("widget", "solar", "panel")
    built = provider.builder.build(_acme(Strategy.KEYWORD, optional_terms=terms))
    aliases = [str(node["Alias"]) for node in scan_nodes(pg_dsn, seeded, built)]
    counts = [alias for alias in aliases if alias.startswith("esra_n")]
    assert counts == ["esra_n"], aliases
    for index in range(len(terms)):
        assert [a for a in aliases if a.startswith(f"esra_df_to{index}")] == [f"esra_df_to{index}"]


def _relation_scans(nodes: list[dict[str, Any]]) -> int:
    """How many times the statement read the relation to count its rows."""
    return sum(int(node["Actual Loops"]) for node in nodes if node["Alias"] == "esra_n")


def _articles(schema: str) -> sql.Identifier:
    return sql.Identifier(schema, CONTRACT_MAPPING.relation)


def _set_row_count(dsn: str, schema: str, rows: int) -> None:
    """Write the contract table's kept row count (a superuser's catalog update)."""
    with admin(dsn) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE pg_catalog.pg_class SET reltuples = %s WHERE oid = {}::regclass"
            ).format(sql.Literal(f'"{schema}"."{CONTRACT_MAPPING.relation}"')),
            (rows,),
        )


def _forget_row_count(dsn: str, schema: str) -> None:
    """Put the table back as never vacuumed or analysed (CREATE INDEX had counted it)."""
    _set_row_count(dsn, schema, -1)


async def test_the_row_count_postgresql_keeps_replaces_counting_every_row(
    pg_dsn: str, seeded: str
) -> None:
    """Until the table is analysed it is counted; afterwards its kept count is used (exact
    for a table this small), the relation is never scanned for it, and nothing reorders."""
    provider = make_provider(pg_dsn, seeded)
    query = _acme(Strategy.KEYWORD, optional_terms=("widget", "solar"))
    try:
        built = provider.builder.build(query)
        _forget_row_count(pg_dsn, seeded)
        counted = [(r.key, r.score) for r in await provider.execute(query, timeout_s=5)]
        assert _relation_scans(scan_nodes(pg_dsn, seeded, built, executed=True)) == 1
        with admin(pg_dsn) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(_articles(seeded)))
        kept = [(r.key, r.score) for r in await provider.execute(query, timeout_s=5)]
        assert _relation_scans(scan_nodes(pg_dsn, seeded, built, executed=True)) == 0
    finally:
        await provider.close()
    assert counted
    assert kept == counted


async def test_a_kept_row_count_below_a_terms_count_still_ranks(pg_dsn: str, seeded: str) -> None:
    """A table grown since its last ANALYZE: the kept count can be below a term's matches;
    the idf then takes the matches as the collection's size instead of failing on ln(<0)."""
    _set_row_count(pg_dsn, seeded, 1)
    provider = make_provider(pg_dsn, seeded)
    try:
        rows = await provider.execute(
            _acme(Strategy.KEYWORD, optional_terms=("widget", "solar", "panel")), timeout_s=5
        )
    finally:
        await provider.close()
    assert len(rows) > 1
    assert all(row.score is not None and row.score >= 0 for row in rows)


@pytest.mark.parametrize("relation", ["Odd 'quote\" %(to0)s name", "x'); DROP TABLE articles; --"])
async def test_a_hostile_relation_name_is_only_ever_a_name(
    pg_dsn: str, pg_schema: str, relation: str
) -> None:
    """The relation's name reaches the kept-count look-up as a quoted string literal; quotes,
    percent signs and statement text in it stay part of the name."""
    seed_table(pg_dsn, pg_schema, CONTRACT_MAPPING, CONTRACT_COLUMNS, CONTRACT_ROWS)
    mapping = attrs.evolve(CONTRACT_MAPPING, relation=relation)
    with admin(pg_dsn) as conn:
        # Renamed once seeded: the seeding helper's own placeholders cannot take a '%' name.
        seeded = sql.Identifier(pg_schema, CONTRACT_MAPPING.relation)
        conn.execute(
            sql.SQL("ALTER TABLE {} RENAME TO {}").format(seeded, sql.Identifier(relation))
        )
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(pg_schema, relation)))
    provider = make_provider(pg_dsn, pg_schema, mappings=(mapping,))
    query = _acme(Strategy.KEYWORD, mapping=mapping, optional_terms=("widget", "solar"))
    try:
        rows = await provider.execute(query, timeout_s=5)
        built = provider.builder.build(query)
    finally:
        await provider.close()
    assert rows
    assert _relation_scans(scan_nodes(pg_dsn, pg_schema, built, executed=True)) == 0
    assert table_counts(pg_dsn, pg_schema) == {relation: len(CONTRACT_ROWS)}
