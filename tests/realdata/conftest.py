"""Real-data fixtures: parse the shared data once, seed each engine once, answer once per engine.

Each engine's answers to every question are computed once per session (one event loop per
engine, ``asyncio.run``), cached here, and compared by the tests. An engine that cannot
run skips its tests with the reason: no shared data (fails under ``CI=true``, see
``tests/_external.py``), no DSN or an unreachable server (``tests/_databases.py``: fails
under ``CI=true`` for PostgreSQL and MariaDB), or its provider distribution not built yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from esra.core.ports import SearchProvider
from esra.core.testing._fakes import InMemorySecretStore, StaticHostAllowlist
from esra.sqlite import SqliteFts5Provider
from tests._databases import require_dsn, unreachable
from tests._external import shared_data
from tests.realdata._config import TENANT, realdata_snapshot
from tests.realdata._data import CHINOOK, RealData, load_real_data
from tests.realdata._questions import Answer, answer_all
from tests.realdata.seed import (
    PG_SCHEMA,
    PG_TEXT_SEARCH_CONFIG,
    find_attribute,
    mysql_database_dsn,
    mysql_helper,
    postgres_helper,
    seed_mysql,
    seed_postgres,
    seed_sqlite,
)

ENGINES = ("sqlite", "postgres", "mysql")
PG_VAR = "ESRA_TEST_POSTGRES_DSN"
MYSQL_VAR = "ESRA_TEST_MYSQL_DSN"


@pytest.fixture(scope="session")
def real_data() -> RealData:
    """Chinook and AdventureWorks parsed from the shared data folder."""
    chinook = shared_data(CHINOOK)
    return load_real_data(chinook.parents[2])


def provider_class(package: str, *names: str) -> Any:
    """The provider class, or skip: its distribution is being built alongside this suite."""
    for name in names:
        found = find_attribute(name, package, f"{package}.provider")
        if found is not None:
            return found
    pytest.skip(f"{package}.{names[0]} does not exist yet: this engine's provider is not built")


def _allowlist(dsn: str) -> StaticHostAllowlist:
    parts = urlsplit(dsn)
    return StaticHostAllowlist([(TENANT, (parts.hostname or "").lower(), parts.port or 0)])


@pytest.fixture(scope="session")
def sqlite_database(real_data: RealData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("realdata") / "realdata.db"
    seed_sqlite(path, real_data, realdata_snapshot().mappings)
    return path


@pytest.fixture(scope="session")
def postgres_dsn(real_data: RealData) -> str:
    """The PostgreSQL DSN, with schema ``esra_realdata`` seeded and indexed."""
    dsn = require_dsn(PG_VAR)
    provider_class("esra.postgres", "PostgresProvider")
    if postgres_helper() is None:
        pytest.skip("esra.postgres.create_text_index does not exist yet")
    import psycopg

    try:
        seed_postgres(dsn, real_data, realdata_snapshot().mappings)
    except psycopg.OperationalError as exc:
        unreachable(PG_VAR, f"cannot seed: {type(exc).__name__}")
    return dsn


@pytest.fixture(scope="session")
def mysql_dsn(real_data: RealData) -> str:
    """The MariaDB DSN of database ``esra_realdata``, seeded and indexed."""
    dsn = require_dsn(MYSQL_VAR)
    provider_class("esra.mysql", "MySqlProvider", "MysqlProvider")
    if mysql_helper() is None:
        pytest.skip("esra.mysql.create_fulltext_index does not exist yet")
    import pymysql

    try:
        seed_mysql(dsn, real_data, realdata_snapshot().mappings)
    except pymysql.err.OperationalError as exc:
        unreachable(MYSQL_VAR, f"cannot seed: {type(exc).__name__}")
    return mysql_database_dsn(dsn)


ProviderFactory = Callable[[], Mapping[str, SearchProvider]]


def sqlite_factory(path: Path) -> ProviderFactory:
    snapshot = realdata_snapshot()
    return lambda: {
        s.id: SqliteFts5Provider(path, mappings=snapshot.mappings_of(s.id))
        for s in snapshot.sources
    }


def postgres_factory(dsn: str) -> ProviderFactory:
    provider = provider_class("esra.postgres", "PostgresProvider")
    snapshot = realdata_snapshot()
    return lambda: {
        s.id: provider(
            tenant_id=TENANT,
            connection=dsn,
            secrets=InMemorySecretStore(),
            allowlist=_allowlist(dsn),
            mappings=snapshot.mappings_of(s.id),
            text_search_config=PG_TEXT_SEARCH_CONFIG,
            search_path=PG_SCHEMA,
        )
        for s in snapshot.sources
    }


def mysql_factory(dsn: str) -> ProviderFactory:
    provider = provider_class("esra.mysql", "MySqlProvider", "MysqlProvider")
    snapshot = realdata_snapshot()
    return lambda: {
        s.id: provider(
            tenant_id=TENANT,
            connection=dsn,
            secrets=InMemorySecretStore(),
            allowlist=_allowlist(dsn),
            mappings=snapshot.mappings_of(s.id),
        )
        for s in snapshot.sources
    }


@pytest.fixture(scope="session")
def factory_of(request: pytest.FixtureRequest) -> Callable[[str], ProviderFactory]:
    """``factory_of(engine)``: builds that engine's providers, one per source (seeded first)."""

    def factory(engine: str) -> ProviderFactory:
        if engine == "sqlite":
            return sqlite_factory(request.getfixturevalue("sqlite_database"))
        if engine == "postgres":
            return postgres_factory(request.getfixturevalue("postgres_dsn"))
        return mysql_factory(request.getfixturevalue("mysql_dsn"))

    return factory


_ANSWERS: dict[str, dict[str, Answer]] = {}


@pytest.fixture(scope="session")
def answers_of(
    factory_of: Callable[[str], ProviderFactory],
) -> Callable[[str], dict[str, Answer]]:
    """``answers_of(engine)``: that engine's answer to every question (computed once)."""

    def answers(engine: str) -> dict[str, Answer]:
        if engine not in _ANSWERS:
            _ANSWERS[engine] = asyncio.run(answer_all(factory_of(engine)))
        return _ANSWERS[engine]

    return answers
