"""Shared helpers for the MySQL / MariaDB tests: a throw-away database, seeding, providers.

Live tests read ``ESRA_TEST_MYSQL_DSN`` (``mysql://user:password@host:port/db``): unset or
unreachable skips locally and fails under ``CI=true``. Each test module works in its own
database ``esra_test_mysql_<pid>_<n>``, created and dropped by the fixtures, so suites can run
side by side.

The tests' own administrative connections are mysql-connector-python's, as the provider's:
statements without values are sent as written, and seeding binds its values as server-side
parameters (a prepared cursor), so no identifier is ever %-formatted.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import attrs
import mysql.connector
import pytest
from mysql.connector.connection import MySQLConnection

from esra.core._config.mapping import FieldType
from esra.core._config.mapping import Mapping as EsraMapping
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResultRow
from esra.core.testing._fakes import InMemorySecretStore, StaticHostAllowlist
from esra.core.testing.contract import CONTRACT_DATASET, ContractDataset
from esra.mysql import MySqlProvider, create_fulltext_index
from esra.mysql._quote import quote_identifier
from tests._databases import require_dsn, unreachable

DSN_VARIABLE = "ESRA_TEST_MYSQL_DSN"
TENANT = "t-contract"

_SQL_TYPES = {
    FieldType.TEXT: "TEXT",
    FieldType.INTEGER: "BIGINT",
    FieldType.NUMBER: "DOUBLE",
    FieldType.BOOLEAN: "BOOLEAN",
    FieldType.DATE: "DATE",
}
_COUNTER = itertools.count()


@attrs.frozen
class Server:
    """Where the test server is, from the DSN."""

    host: str
    port: int
    user: str
    password: str = attrs.field(repr=False)

    @contextlib.contextmanager
    def connect(self, database: str | None = None, **extra: Any) -> Iterator[MySQLConnection]:
        """An administrative autocommit connection (the tests' own, never the provider's),
        closed on leaving the block."""
        connection = MySQLConnection(
            host=self.host, port=self.port, user=self.user, password=self.password,
            database=database, charset="utf8mb4", autocommit=True, ssl_disabled=True, **extra,
        )  # fmt: skip
        try:
            yield connection
        finally:
            connection.close()

    def template(self, database: str, *, user: str | None = None, password: str = "") -> str:
        """A connection template for ``database``; a password goes through a secret."""
        who = user if user is not None else self.user
        secret = ":${secret:pw}" if (password or (user is None and self.password)) else ""
        return f"mysql://{who}{secret}@{self.host}:{self.port}/{database}"

    def provider(
        self,
        database: str,
        *,
        user: str | None = None,
        password: str | None = None,
        **options: Any,
    ) -> MySqlProvider:
        """A provider over ``database`` with an allowlist and secret store that admit it."""
        secret = password if password is not None else (self.password if user is None else "")
        return MySqlProvider(
            tenant_id=TENANT,
            connection=self.template(database, user=user, password=secret),
            secrets=InMemorySecretStore({(TENANT, "pw"): secret}),
            allowlist=StaticHostAllowlist([(TENANT, self.host, self.port)]),
            **options,
        )


def _server() -> Server:
    dsn = require_dsn(DSN_VARIABLE)
    parts = urlsplit(dsn)
    server = Server(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
    )
    try:
        with server.connect(connection_timeout=5):
            pass
    except mysql.connector.Error as exc:
        unreachable(DSN_VARIABLE, f"cannot connect: {exc.errno}")
    return server


@pytest.fixture(scope="session")
def server() -> Server:
    """The live test server (skips / fails as ``tests._databases`` says when unusable)."""
    return _server()


def create_database(server: Server) -> str:
    """Create a fresh, uniquely named database and return its name."""
    name = f"esra_test_mysql_{os.getpid()}_{next(_COUNTER)}"
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")
        cursor.execute(
            f"CREATE DATABASE {quote_identifier(name)} CHARACTER SET utf8mb4 "
            "COLLATE utf8mb4_unicode_ci"
        )
    return name


def drop_database(server: Server, name: str) -> None:
    """Drop ``name`` (a database this test run created)."""
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")


@pytest.fixture(scope="module")
def database(server: Server) -> Iterator[str]:
    """A database of this module's own, dropped afterwards."""
    name = create_database(server)
    yield name
    drop_database(server, name)


def seed_table(
    server: Server,
    database: str,
    mapping: EsraMapping,
    columns: Sequence[tuple[str, FieldType]],
    rows: Sequence[Mapping[str, object]],
    *,
    with_index: bool = True,
) -> None:
    """Create ``mapping.relation`` (InnoDB) with ``columns``, insert ``rows``, index it."""
    names = [name for name, _ in columns]
    table = quote_identifier(mapping.relation)
    if mapping.schema:
        table = f"{quote_identifier(mapping.schema)}.{table}"
    key = names[0]
    ddl = ", ".join(
        f"{quote_identifier(name)} "
        + ("VARCHAR(64)" if name == key and kind is FieldType.TEXT else _SQL_TYPES[kind])
        for name, kind in columns
    )
    with server.connect(database) as connection:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(
                f"CREATE TABLE {table} ({ddl}, PRIMARY KEY ({quote_identifier(key)})) ENGINE=InnoDB"
            )
        values: list[tuple[Any, ...]] = [tuple(row[name] for name in names) for row in rows]
        if values:
            with connection.cursor(prepared=True) as cursor:
                cursor.executemany(
                    f"INSERT INTO {table} ({', '.join(map(quote_identifier, names))}) "
                    f"VALUES ({', '.join('?' for _ in names)})",
                    values,
                )
        if with_index:
            create_fulltext_index(connection, mapping)


def seed_contract(
    server: Server, database: str, dataset: ContractDataset = CONTRACT_DATASET
) -> None:
    """Seed the provider contract suite's standard dataset into ``database``."""
    seed_table(server, database, dataset.mapping, dataset.columns, dataset.rows)


def table_counts(server: Server, database: str) -> dict[str, int]:
    """Return the row count of every table in ``database``."""
    with server.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
            "ORDER BY TABLE_NAME"
        )
        names = [str(scalar(row)) for row in cursor.fetchall()]
        counts = {}
        for name in names:
            cursor.execute(f"SELECT COUNT(*) FROM {quote_identifier(name)}")
            counts[name] = int(scalar(cursor.fetchone()))
    return counts


def scalar(row: Any) -> Any:
    """The one value of a one-column row a test fetched."""
    assert row is not None
    return row[0]


def run_query(
    provider: MySqlProvider, query: ValidatedQuery, timeout_s: float = 10.0
) -> list[ResultRow]:
    """Execute ``query`` from synchronous code (hypothesis tests) on a fresh event loop."""
    return list(asyncio.run(provider.execute(query, timeout_s=timeout_s)))


def close_now(provider: MySqlProvider) -> None:
    """Close ``provider`` from synchronous code."""
    asyncio.run(provider.close())


@pytest.fixture(scope="module")
def contract_database(server: Server, database: str) -> str:
    """``database`` seeded with the contract dataset and its FULLTEXT index."""
    seed_contract(server, database)
    return database


@pytest.fixture
def provider(server: Server, contract_database: str) -> Iterator[MySqlProvider]:
    """A provider over the contract database, closed after the test."""
    provider = server.provider(contract_database, mappings=(CONTRACT_DATASET.mapping,))
    yield provider
    close_now(provider)
