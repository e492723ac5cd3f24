"""Every prompt- and claim-derived value reaches MySQL / MariaDB as a parameter, never as text.

Spec 000 §5: every command "carries every prompt-derived and claim-derived value as a
parameter, never as command text". A hostile review found the MySQL provider broke it: it sent
searches through PyMySQL, whose ``cursor.execute(sql, params)`` escapes each value and writes
it into the command text on the client (``COM_QUERY``), so search terms, filter values and
claim values reached the server's SQL parser as string literals — exactly what
``docs/security.md`` refuses for SQL Server. The provider now prepares the statement's text
alone (``COM_STMT_PREPARE``) and sends the values in the binary ``COM_STMT_EXECUTE`` packet.

One search carries a distinctive search term, filter value and claim value, and two records
of what was sent are checked:

- the driver's: the text handed to ``cmd_stmt_prepare`` holds none of the three, the values
  handed to ``cmd_stmt_execute`` hold all three, and no text command was sent for it;
- the server's own, its general query log, for a login of the test's own: no statement the
  server parsed (``Query`` and ``Prepare`` entries) holds any of the three, and the search's
  ``Execute`` entry (which the server logs with the parameters written in, for reading) holds
  all three, so they arrived as that prepared statement's parameters. This record does not
  depend on the driver; against the PyMySQL provider the search is a ``Query`` entry holding
  all three, and both tests fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from mysql.connector import errors
from mysql.connector.connection import MySQLConnection

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ResolvedFilter
from esra.mysql import MySqlProvider
from tests._databases import unreachable
from tests._injection import issue
from tests.mysql.conftest import DSN_VARIABLE, Server, close_now, run_query, scalar

pytestmark = [pytest.mark.mysql, pytest.mark.integration]

_TERM = "zqxtermmarker"
_VALUE = "zqxvaluemarker"
_CLAIM = "zqxclaimmarker"
_MARKERS = (_TERM, _VALUE, _CLAIM)
# Serialises the tests that switch the server-wide general log on and off.
_LOG_LOCK = "esra_test_general_log"


def _search(provider: MySqlProvider) -> None:
    """One search carrying each marker: a required term, a filter value, a claim value."""
    query = issue(
        required_terms=(_TERM,),
        filters=(ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, (_VALUE,)),),
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, (_CLAIM,)),),
    )
    assert run_query(provider, query) == []


def _holds(text: object, marker: str) -> bool:
    return marker in (text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text))


def test_the_driver_prepares_text_without_values_and_sends_them_apart(
    provider: MySqlProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the provider hands the driver: text to prepare, values to execute with."""
    prepared: list[bytes] = []
    executed: list[tuple[object, ...]] = []
    queried: list[object] = []
    prepare, execute = MySQLConnection.cmd_stmt_prepare, MySQLConnection.cmd_stmt_execute
    query_text = MySQLConnection.cmd_query

    def recording_prepare(self: MySQLConnection, statement: bytes, **kwargs: Any) -> Any:
        prepared.append(statement)
        return prepare(self, statement, **kwargs)

    def recording_execute(self: MySQLConnection, statement_id: Any, *args: Any, **kw: Any) -> Any:
        executed.append(tuple(kw.get("data", args[0] if args else ())))
        return execute(self, statement_id, *args, **kw)

    def recording_query(self: MySQLConnection, query: Any, *args: Any, **kwargs: Any) -> Any:
        queried.append(query)
        return query_text(self, query, *args, **kwargs)

    monkeypatch.setattr(MySQLConnection, "cmd_stmt_prepare", recording_prepare)
    monkeypatch.setattr(MySQLConnection, "cmd_stmt_execute", recording_execute)
    monkeypatch.setattr(MySQLConnection, "cmd_query", recording_query)
    _search(provider)
    searches = [i for i, text in enumerate(prepared) if b"MATCH" in text and b"art_org" in text]
    assert len(searches) == 1, prepared
    for text in (*prepared, *queried):
        for marker in _MARKERS:
            assert not _holds(text, marker), f"{marker} was sent as command text"
    values = executed[searches[0]]
    for marker in _MARKERS:
        assert any(_holds(value, marker) for value in values), f"{marker} was not a parameter"


@pytest.fixture
def own_login(server: Server, contract_database: str) -> Iterator[tuple[str, str]]:
    """A login of this test's own (so its log entries are told apart), SELECT only."""
    user, password = f"esra_values_{os.getpid()}", "Values-pw-1"
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        cursor.execute(f"GRANT SELECT ON `{contract_database}`.* TO '{user}'@'%'")
    yield user, password
    with server.connect() as connection, connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.fixture
def general_log(server: Server) -> Iterator[MySQLConnection]:
    """The server's general query log written to ``mysql.general_log`` while the test runs,
    then set back as it was; an administrative connection holding the log's lock."""
    with server.connect() as admin, admin.cursor() as cursor:
        cursor.execute(f"SELECT GET_LOCK('{_LOG_LOCK}', 60)")
        assert scalar(cursor.fetchone()) == 1
        cursor.execute("SELECT @@global.general_log")
        enabled = int(scalar(cursor.fetchone()))
        cursor.execute("SELECT @@global.log_output")
        output = str(scalar(cursor.fetchone()))
        try:
            cursor.execute("SET GLOBAL log_output = 'FILE,TABLE'")
        except errors.Error as exc:
            unreachable(DSN_VARIABLE, f"cannot switch the general log on: {exc.errno}")
        cursor.execute("SET GLOBAL general_log = 1")
        try:
            yield admin
        finally:
            cursor.execute(f"SET GLOBAL general_log = {enabled}")
            cursor.execute(f"SET GLOBAL log_output = '{output}'")
            cursor.execute(f"SELECT RELEASE_LOCK('{_LOG_LOCK}')")
            cursor.fetchall()


def test_the_server_parses_no_value_and_receives_each_as_a_parameter(
    server: Server,
    contract_database: str,
    own_login: tuple[str, str],
    general_log: MySQLConnection,
) -> None:
    """The server's record: no parsed text holds a value; the executed statement got all."""
    user, password = own_login
    with general_log.cursor() as cursor:
        cursor.execute("SELECT NOW(6)")
        since = scalar(cursor.fetchone())
    provider = server.provider(contract_database, user=user, password=password)
    try:
        _search(provider)
    finally:
        close_now(provider)
    with general_log.cursor() as cursor:
        cursor.execute(
            "SELECT command_type, CONVERT(argument USING utf8mb4) FROM mysql.general_log "
            f"WHERE event_time >= '{since}' AND user_host LIKE '{user}[%' ORDER BY event_time"
        )
        entries = [(str(kind), str(text)) for kind, text in cursor.fetchall()]
    parsed = [text for kind, text in entries if kind in {"Query", "Prepare"}]
    assert any("MATCH" in text and "art_org" in text for text in parsed), entries
    for text in parsed:
        for marker in _MARKERS:
            assert marker not in text, f"the server parsed {marker} as command text"
    executed = [text for kind, text in entries if kind == "Execute" and "MATCH" in text]
    assert len(executed) == 1, entries
    for marker in _MARKERS:
        assert marker in executed[0], f"{marker} did not reach the server as a parameter"
