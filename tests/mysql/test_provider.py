"""MySqlProvider beyond the shared contract: template path, limits, read-only, health."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import mysql.connector
import pytest

from esra.core._admin.secrets import InMemorySecretVault
from esra.core._config.mapping import FieldType, Operator
from esra.core._config.source import SourceHealth
from esra.core._pipeline.values import ValidatedQuery, _issue
from esra.core._query import ProjectedField, ResolvedFilter, Strategy
from esra.core.codes import ProviderErrorCode as C
from esra.core.exceptions import ProviderError
from esra.core.ports import SearchProvider, TextIndexKind
from esra.core.testing._fakes import InMemorySecretStore, StaticHostAllowlist
from esra.core.testing.contract import (
    CONTRACT_COLUMNS,
    CONTRACT_MAPPING,
    CONTRACT_ROWS,
    contract_query,
)
from esra.mysql import MySqlProvider, ServerFlavor
from esra.mysql._quote import quote_identifier
from tests.mysql.conftest import TENANT, Server, close_now, scalar, seed_table

pytestmark = [pytest.mark.mysql, pytest.mark.integration]


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


def _no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def slow_view(server: Server, contract_database: str) -> Iterator[Any]:
    """A view shaped like the contract table whose every scan walks 10^11 sequence rows."""
    name = "contract_slow"
    with server.connect(contract_database) as connection, connection.cursor() as cursor:
        cursor.execute(
            f"CREATE OR REPLACE VIEW {name} AS SELECT CAST(seq AS CHAR) AS art_key, "
            "'t' AS art_title, 'b' AS `Art Body`, 'c' AS art_category, seq AS art_year, "
            "IF(MOD(seq, 7) = 9, 'acme', 'nobody') AS art_org, 's' AS art_secret, "
            "CURRENT_DATE AS art_published FROM seq_1_to_100000000000"
        )
    yield attrs.evolve(CONTRACT_MAPPING, relation=name)
    with server.connect(contract_database) as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP VIEW IF EXISTS {name}")


async def test_is_a_search_provider_with_explicit_capabilities(
    provider: MySqlProvider,
) -> None:
    """All six strategies, every operator, the MySQL FULLTEXT index kind; nothing connected."""
    assert isinstance(provider, SearchProvider)
    caps = provider.capabilities
    assert caps.strategies == frozenset(Strategy)
    assert caps.operators == frozenset(Operator)
    assert caps.text_index is TextIndexKind.MYSQL_FULLTEXT
    assert provider.server is None


async def test_first_use_detects_mariadb_and_its_token_rules(provider: MySqlProvider) -> None:
    """The local server is MariaDB: 3-character tokens and InnoDB's 36 stopwords."""
    await provider.execute(_acme(), timeout_s=10.0)
    assert provider.server is not None
    assert provider.server.flavor is ServerFlavor.MARIADB
    assert provider.server.rules.min_token == 3
    assert len(provider.server.rules.stopwords) == 35  # the server lists "the" twice


@pytest.mark.parametrize(
    ("template", "allowed", "secrets", "expected"),
    [
        ("mysql://u:${secret:pw}@db.internal:3306/x", False, True, C.HOST_NOT_ALLOWED),
        ("mysql://u:${secret:pw}@db.internal:3306/x", True, False, C.SECRET_UNRESOLVED),
        ("postgres://u@db.internal:3306/x", True, True, C.CONNECTION_TEMPLATE_INVALID),
        ("mysql://u@${secret:pw}:3306/x", True, True, C.CONNECTION_TEMPLATE_INVALID),
        ("mysql://u@db.internal:3306/x?init_command=x", True, True, C.CONNECTION_TEMPLATE_INVALID),
        ("mysql://u@db.internal:3306/x?connect_timeout=1;", True, True,
         C.CONNECTION_TEMPLATE_INVALID),
    ],
)  # fmt: skip
async def test_template_failures_open_no_socket(
    monkeypatch: pytest.MonkeyPatch,
    template: str,
    allowed: bool,
    secrets: bool,
    expected: C,
) -> None:
    """Host allowlist, secrets and template shape are settled before any connection."""
    _no_socket(monkeypatch)
    provider = MySqlProvider(
        tenant_id=TENANT,
        connection=template,
        secrets=InMemorySecretStore({(TENANT, "pw"): "s3cret"} if secrets else {}),
        allowlist=StaticHostAllowlist([(TENANT, "db.internal", 3306)] if allowed else []),
    )
    with pytest.raises(ProviderError) as raised:
        await provider.execute(_acme(), timeout_s=5.0)
    assert raised.value.code is expected
    assert await provider.health() is SourceHealth.UNAVAILABLE
    await provider.close()


async def test_a_ca_that_is_no_regular_file_opens_no_socket(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The driver reads ``ssl_ca`` on a slot's thread to the end: a FIFO held that thread
    for ever, and a directory or a missing file can never connect. Each is an invalid
    template, settled before any connection."""
    _no_socket(monkeypatch)
    fifo, directory = tmp_path / "ca.fifo", tmp_path / "ca.d"
    os.mkfifo(fifo)
    directory.mkdir()
    for ca in (fifo, directory, tmp_path / "missing.pem", "/dev/stdin"):
        provider = MySqlProvider(
            tenant_id=TENANT,
            connection=f"mysql://u@db.internal:3306/x?ssl_ca={ca}",
            secrets=InMemorySecretStore(),
            allowlist=StaticHostAllowlist([(TENANT, "db.internal", 3306)]),
        )
        with pytest.raises(ProviderError) as raised:
            await provider.execute(_acme(), timeout_s=5.0)
        await provider.close()
        assert raised.value.code is C.CONNECTION_TEMPLATE_INVALID, ca


async def test_closed_port_is_connection_refused(server: Server) -> None:
    """A refused TCP connection (127.0.0.1:1) is CONNECTION_REFUSED; health UNAVAILABLE."""
    provider = MySqlProvider(
        tenant_id=TENANT,
        connection="mysql://root@127.0.0.1:1/test",
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist([(TENANT, "127.0.0.1", 1)]),
    )
    with pytest.raises(ProviderError) as raised:
        await provider.execute(_acme(), timeout_s=5.0)
    assert raised.value.code is C.CONNECTION_REFUSED
    assert await provider.health() is SourceHealth.UNAVAILABLE
    await provider.close()


@pytest.fixture
def reader(server: Server, contract_database: str) -> Iterator[tuple[str, str]]:
    """A login with a password that may read only a decoy table, never the contract table."""
    user, password = "esra_test_mysql_reader", "Reader-pw-1"
    with server.connect(contract_database) as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cursor.execute("CREATE TABLE IF NOT EXISTS decoy (a INT) ENGINE=InnoDB")
        cursor.execute(
            f"GRANT SELECT ON {quote_identifier(contract_database)}.decoy TO '{user}'@'%'"
        )
    yield user, password
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")


async def test_wrong_password_is_auth_failed(
    server: Server, contract_database: str, reader: tuple[str, str]
) -> None:
    """A real login with the wrong password is AUTH_FAILED."""
    provider = server.provider(contract_database, user=reader[0], password="wrong-password")
    with pytest.raises(ProviderError) as raised:
        await provider.execute(_acme(), timeout_s=5.0)
    assert raised.value.code is C.AUTH_FAILED
    await provider.close()


async def test_missing_select_privilege_is_permission_denied(
    server: Server, contract_database: str, reader: tuple[str, str]
) -> None:
    """A login without SELECT on the table gets PERMISSION_DENIED (error 1142)."""
    provider = server.provider(contract_database, user=reader[0], password=reader[1])
    query = contract_query(provider, optional=("solar",))
    with pytest.raises(ProviderError) as raised:
        await provider.execute(query, timeout_s=5.0)
    assert raised.value.code is C.PERMISSION_DENIED
    # The stopword list needs PROCESS, which this login lacks: the defaults were used.
    assert provider.server is not None
    assert "the" in provider.server.rules.stopwords
    await provider.close()


async def test_a_rotated_password_is_used_by_the_next_connection_a_slot_opens(
    server: Server, contract_database: str
) -> None:
    """Rotating the stored secret needs no reopened provider: each connection a slot opens
    resolves the template again, so once the server drops the old session the next one logs
    in with the new password (the old one no longer would)."""
    user, first, second = "esra_test_mysql_rotated", "Rotated-pw-1", "Rotated-pw-2"
    with server.connect(contract_database) as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{first}'")
        cursor.execute(f"GRANT SELECT ON {quote_identifier(contract_database)}.* TO '{user}'@'%'")
    vault = InMemorySecretVault()
    await vault.put(TENANT, "pw", first)
    provider = MySqlProvider(
        tenant_id=TENANT,
        connection=server.template(contract_database, user=user, password=first),
        secrets=vault,
        allowlist=StaticHostAllowlist([(TENANT, server.host, server.port)]),
        pool_size=1,
    )
    try:
        assert await provider.execute(_acme(), timeout_s=5.0)
        with server.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"ALTER USER '{user}'@'%' IDENTIFIED BY '{second}'")
            await vault.put(TENANT, "pw", second)
            cursor.execute(f"SELECT id FROM information_schema.processlist WHERE user = '{user}'")
            for row in cursor.fetchall():
                cursor.execute(f"KILL CONNECTION {int(scalar(row))}")
        with pytest.raises(ProviderError):  # the session the server dropped, discarded
            await provider.execute(_acme(), timeout_s=5.0)
        assert await provider.execute(_acme(), timeout_s=5.0)
    finally:
        await provider.close()
        with server.connect() as connection, connection.cursor() as cursor:
            cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")


async def test_missing_fulltext_index_is_classified(server: Server, contract_database: str) -> None:
    """No FULLTEXT index: COLUMN_NOT_INDEXED with text_index configured, else UNAVAILABLE."""
    bare = attrs.evolve(CONTRACT_MAPPING, relation="contract_bare")
    seed_table(server, contract_database, bare, CONTRACT_COLUMNS, [], with_index=False)
    provider = server.provider(contract_database, mappings=(bare,))
    try:
        for mapping, expected in (
            (bare, C.COLUMN_NOT_INDEXED),
            (attrs.evolve(bare, text_index=None), C.TEXT_INDEX_UNAVAILABLE),
        ):
            query = contract_query(provider, mapping=mapping, optional=("solar",))
            with pytest.raises(ProviderError) as raised:
                await provider.execute(query, timeout_s=5.0)
            assert raised.value.code is expected
        assert await provider.health() is SourceHealth.UNAVAILABLE
    finally:
        await provider.close()


async def test_statement_past_its_timeout_is_timeout(
    provider: MySqlProvider, slow_view: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The server stops the statement at its limit (error 1969) and it is TIMEOUT."""
    with caplog.at_level(logging.WARNING, "esra.mysql"), pytest.raises(ProviderError) as raised:
        await provider.execute(_acme(mapping=slow_view), timeout_s=0.5)
    assert raised.value.code is C.TIMEOUT
    assert "1969" in caplog.text  # the server's limit fired, not the client backstop


async def test_cancellation_kills_the_statement_and_propagates(
    server: Server, contract_database: str, slow_view: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Cancelling the awaiting task sends KILL QUERY; the connection then serves the next query."""
    provider = server.provider(contract_database, pool_size=1)
    try:
        await provider.execute(_acme(), timeout_s=10.0)  # connect first
        with caplog.at_level(logging.WARNING, "esra.mysql"):
            task = asyncio.create_task(provider.execute(_acme(mapping=slow_view), timeout_s=60.0))
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # pool_size=1: this waits for the killed statement's thread, then reuses it.
            rows = await provider.execute(_acme(), timeout_s=30.0)
        assert rows
        assert "failed as CANCELLED" in caplog.text
        assert "1317" in caplog.text
    finally:
        await provider.close()


async def test_the_providers_connection_cannot_write(
    provider: MySqlProvider, server: Server, contract_database: str
) -> None:
    """A write over the provider's own pooled session, in its transaction, is refused."""
    await provider.execute(_acme(), timeout_s=10.0)
    pool = provider._engine._pool
    assert pool is not None
    slot = pool.try_acquire()
    assert slot is not None

    def write() -> None:
        with slot.connection().connection.cursor() as cursor:
            try:
                cursor.execute("DELETE FROM contract_articles")  # outside any transaction
            finally:
                slot.connection().connection.rollback()
            cursor.execute("START TRANSACTION READ ONLY")
            try:
                cursor.execute("UPDATE contract_articles SET art_title = 'x'")
            finally:
                slot.connection().connection.rollback()

    with pytest.raises(mysql.connector.Error) as raised:
        await asyncio.get_running_loop().run_in_executor(slot.executor, write)
    assert raised.value.errno == 1792
    pool.release(slot)
    with server.connect(contract_database) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM contract_articles")
        assert scalar(cursor.fetchone()) == 10


async def test_the_session_runs_one_statement_per_command_without_delay(
    provider: MySqlProvider,
) -> None:
    """The driver's default CLIENT_MULTI_STATEMENTS is off (two statements in one text command
    are a syntax error), and TCP_NODELAY is on."""
    await provider.execute(_acme(), timeout_s=10.0)
    pool = provider._engine._pool
    assert pool is not None
    slot = pool.try_acquire()
    assert slot is not None

    def check() -> int:
        connection = slot.connection().connection
        with pytest.raises(mysql.connector.Error) as raised:
            connection.cmd_query("SELECT 1; SELECT 2")
        assert raised.value.errno == 1064
        assert connection._socket is not None
        sock = connection._socket.sock
        assert sock is not None
        return int(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    try:
        assert await asyncio.get_running_loop().run_in_executor(slot.executor, check)
    finally:
        pool.release(slot)


async def test_a_search_that_would_write_is_refused(server: Server, contract_database: str) -> None:
    """An execution is one autocommit SELECT, so the session's own READ ONLY is all that
    refuses a write through it: here a view whose every row calls a function that inserts.
    Nothing is written, and the refusal is classified, never the driver's text."""
    with server.connect(contract_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE OR REPLACE TABLE esra_side_effects (n INT) ENGINE=InnoDB")
        cursor.execute(
            "CREATE OR REPLACE FUNCTION esra_side_effect() RETURNS INT MODIFIES SQL DATA "
            "BEGIN INSERT INTO esra_side_effects VALUES (1); RETURN 1; END"
        )
        cursor.execute(
            "CREATE OR REPLACE VIEW contract_writing AS SELECT * FROM contract_articles "
            "WHERE esra_side_effect() = 1"
        )
    provider = server.provider(contract_database)
    try:
        writing = attrs.evolve(CONTRACT_MAPPING, relation="contract_writing", text_index=None)
        with pytest.raises(ProviderError) as raised:
            await provider.execute(_acme(mapping=writing), timeout_s=10.0)
        assert raised.value.code is C.PERMISSION_DENIED
        # The pooled session is still usable and still read-only afterwards.
        assert await provider.execute(_acme(), timeout_s=10.0)
        with pytest.raises(ProviderError):
            await provider.execute(_acme(mapping=writing), timeout_s=10.0)
    finally:
        await provider.close()
        with server.connect(contract_database) as connection, connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM esra_side_effects")
            written = scalar(cursor.fetchone())
            cursor.execute("DROP VIEW contract_writing")
            cursor.execute("DROP FUNCTION esra_side_effect")
            cursor.execute("DROP TABLE esra_side_effects")
    assert written == 0


async def test_a_connection_left_mid_result_is_not_reused(
    provider: MySqlProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while rows are still being read leaves the connection out of step with the
    server; the next execution must not inherit it (it would read the old rows' packets)."""
    expected = await provider.execute(_acme(), timeout_s=10.0)
    assert len(expected) > 1
    pool = provider._engine._pool
    assert pool is not None
    slot = pool.try_acquire()
    assert slot is not None
    # The driver decodes each binary row as it reads it: the first row's decoding fails, with
    # the rest of the rows still unread on the socket.
    protocol = slot.connection().connection._protocol
    assert protocol is not None
    original = protocol._parse_binary_values
    failures = iter([True])

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        if next(failures, False):
            raise ValueError("a converter failed part-way through the rows")
        return original(*args, **kwargs)

    monkeypatch.setattr(protocol, "_parse_binary_values", fails_once)
    pool.release(slot)
    with pytest.raises(ProviderError):
        await provider.execute(_acme(), timeout_s=10.0)
    for _ in range(3):
        assert await provider.execute(_acme(), timeout_s=10.0) == expected


async def test_short_and_stopword_required_terms_are_enforced(provider: MySqlProvider) -> None:
    """Terms MATCH cannot see (short, stopwords) are required by LIKE, never dropped."""
    only_a06 = {"a06"}
    for term in ("c++", "x:y", "or beta", "the NEAR"):
        rows = await provider.execute(contract_query(provider, required=(term,)), timeout_s=10.0)
        assert {r.key for r in rows} == only_a06, term
    # A bare short term is a substring: it may over-match inside words, never drop a row.
    rows = await provider.execute(contract_query(provider, required=("or",)), timeout_s=10.0)
    assert "a06" in {r.key for r in rows}
    # A wildcard in a term is a literal, not LIKE syntax.
    for term in ("%", "_", "!", "sol%r"):
        rows = await provider.execute(
            contract_query(provider, required=("solar", term)), timeout_s=10.0
        )
        assert rows == [], term


async def test_identifiers_with_percent_and_backticks(
    server: Server, contract_database: str
) -> None:
    """Identifiers holding ``%``, ``%(name)s`` and backticks stay identifiers: the text is
    read back from the builder's ``pyformat`` exactly, and no driver %-formats it; a ``?``
    inside a quoted identifier is no placeholder to the server."""
    title = "art_title 100%s ?"
    odd = attrs.evolve(
        CONTRACT_MAPPING,
        relation="odd `table` 50%(lim)s",
        text_index="odd%s idx",
        fields=tuple(
            attrs.evolve(f, column=title) if f.name == "title" else f
            for f in CONTRACT_MAPPING.fields
        ),
    )
    columns = tuple((title if n == "art_title" else n, kind) for n, kind in CONTRACT_COLUMNS)
    rows = [{(title if k == "art_title" else k): v for k, v in r.items()} for r in CONTRACT_ROWS]
    seed_table(server, contract_database, odd, columns, rows)
    provider = server.provider(contract_database, mappings=(odd,))
    try:
        found = await provider.execute(
            contract_query(provider, mapping=odd, phrases=("solar panel",)), timeout_s=10.0
        )
        assert {r.key for r in found} == {"a07", "a01"}
        assert found[0].values["title"] in {"Solar panel maintenance", "Quarterly budget report"}
        assert await provider.health() is SourceHealth.HEALTHY
    finally:
        await provider.close()


async def test_health(provider: MySqlProvider, server: Server, contract_database: str) -> None:
    """HEALTHY with its table and index; DEGRADED when another mapping's table is missing."""
    assert await provider.health() is SourceHealth.HEALTHY
    missing = attrs.evolve(CONTRACT_MAPPING, id="m2", relation="contract_nowhere")
    mixed = server.provider(contract_database, mappings=(CONTRACT_MAPPING, missing))
    try:
        assert await mixed.health() is SourceHealth.DEGRADED
    finally:
        await mixed.close()


async def test_schema_qualified_mapping(provider: MySqlProvider, contract_database: str) -> None:
    """A mapping's schema qualifies its table; the session's database stays the template's."""
    qualified = attrs.evolve(CONTRACT_MAPPING, schema=contract_database)
    rows = await provider.execute(
        contract_query(provider, mapping=qualified, optional=("inverter",)), timeout_s=10.0
    )
    assert {r.key for r in rows} == {"a02", "a05", "a07", "a09"}


def test_unused_provider_closes_without_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Construction and close open nothing."""
    _no_socket(monkeypatch)
    provider = MySqlProvider(
        tenant_id=TENANT,
        connection="mysql://u@db.internal/x",
        secrets=InMemorySecretStore(),
        allowlist=StaticHostAllowlist(),
    )
    close_now(provider)
