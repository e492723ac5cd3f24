"""A pooled connection prepares a search once and executes it again with new values.

Preparing every execution (``COM_STMT_PREPARE``, execute, ``COM_STMT_CLOSE``) cost esra-mysql
1.1-1.4x per statement against the text protocol it replaced; each connection now keeps what
it prepared (``esra.mysql._statement_cache``), and a search's time limit is rounded so that
its text recurs (``reusable_limit_s``). What must hold: the rows are the same as a fresh
statement's, values still travel apart from the text, the connection keeps a bounded number of
statements and closes those it drops, a statement whose execution failed is never reused, and
a server out of prepared-statement room costs the cache, not the search.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mysql.connector import errors
from mysql.connector.connection import MySQLConnection

from esra.mysql import MySqlProvider
from esra.mysql._server import reusable_limit_s
from esra.mysql._statement_cache import PreparedStatements
from tests._injection import issue
from tests.mysql.conftest import Server, run_query


class _Recorder:
    """Counts the driver's prepares and closes (the real calls still run)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.prepared: list[bytes] = []
        self.closed: list[int] = []
        self.ids: dict[int, bytes] = {}
        prepare, close = MySQLConnection.cmd_stmt_prepare, MySQLConnection.cmd_stmt_close

        def recording_prepare(connection: MySQLConnection, text: bytes, **kw: Any) -> Any:
            self.prepared.append(text)
            answer = prepare(connection, text, **kw)
            self.ids[int(answer["statement_id"])] = text
            return answer

        def recording_close(connection: MySQLConnection, statement: int, **kw: Any) -> Any:
            self.closed.append(statement)
            return close(connection, statement, **kw)

        monkeypatch.setattr(MySQLConnection, "cmd_stmt_prepare", recording_prepare)
        monkeypatch.setattr(MySQLConnection, "cmd_stmt_close", recording_close)


@pytest.fixture
def connection(server: Server, database: str) -> Iterator[MySQLConnection]:
    with server.connect(database) as opened:
        yield opened


@pytest.mark.mysql
@pytest.mark.integration
def test_a_text_is_prepared_once_and_answers_each_execution_with_its_values(
    connection: MySQLConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    statements = PreparedStatements(connection)
    answers = [statements.fetch_all("SELECT ? + 1, ?", (n, f"v{n}")) for n in range(5)]
    assert answers == [[(n + 1, f"v{n}")] for n in range(5)]
    assert recorder.prepared == [b"SELECT ? + 1, ?"]
    assert recorder.closed == []
    assert len(statements) == 1


@pytest.mark.mysql
@pytest.mark.integration
def test_the_least_recently_used_statement_is_closed_past_capacity(
    connection: MySQLConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    statements = PreparedStatements(connection, capacity=2)
    assert statements.fetch_all("SELECT ?", (1,)) == [(1,)]
    assert statements.fetch_all("SELECT ? * 2", (2,)) == [(4,)]
    assert statements.fetch_all("SELECT ?", (3,)) == [(3,)]  # now the most recent
    assert statements.fetch_all("SELECT ? * 3", (3,)) == [(9,)]  # drops "SELECT ? * 2"
    assert len(recorder.closed) == 1
    assert len(statements) == 2
    assert statements.fetch_all("SELECT ?", (5,)) == [(5,)]
    assert statements.fetch_all("SELECT ? * 2", (5,)) == [(10,)]
    assert recorder.prepared == [b"SELECT ?", b"SELECT ? * 2", b"SELECT ? * 3", b"SELECT ? * 2"]
    # A closed statement is gone from the server: its id no longer executes.
    with pytest.raises(errors.Error):
        connection.cmd_stmt_execute(recorder.closed[0], data=(1,), parameters=())


@pytest.mark.mysql
@pytest.mark.integration
def test_a_statement_whose_execution_failed_is_prepared_afresh(
    connection: MySQLConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _Recorder(monkeypatch)
    statements = PreparedStatements(connection)
    # Fails at execution for some values only: "Subquery returns more than 1 row" (1242).
    text = "SELECT (SELECT seq FROM seq_1_to_3 WHERE seq > ?)"
    assert statements.fetch_all(text, (2,)) == [(3,)]
    with pytest.raises(errors.Error) as failed:
        statements.fetch_all(text, (0,))
    assert failed.value.errno == 1242
    assert len(recorder.closed) == 1
    assert len(statements) == 0
    assert statements.fetch_all(text, (2,)) == [(3,)]
    assert recorder.prepared == [text.encode(), text.encode()]


@pytest.mark.mysql
@pytest.mark.integration
def test_a_server_out_of_statement_room_costs_the_cache_not_the_search(
    connection: MySQLConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Error 1461 (``max_prepared_stmt_count`` reached server-wide) once: the connection
    closes what it keeps and prepares again. Raised by a stand-in on the real connection,
    since the server-wide count is shared with every other test's session."""
    statements = PreparedStatements(connection)
    assert statements.fetch_all("SELECT ?", (1,)) == [(1,)]
    prepare = MySQLConnection.cmd_stmt_prepare
    refusals = [
        errors.DatabaseError(msg="Can't create more than max_prepared_stmt_count", errno=1461)
    ]

    def full_server(self: MySQLConnection, text: bytes, **kw: Any) -> Any:
        if refusals:
            raise refusals.pop()
        return prepare(self, text, **kw)

    monkeypatch.setattr(MySQLConnection, "cmd_stmt_prepare", full_server)
    assert statements.fetch_all("SELECT ? * 2", (2,)) == [(4,)]
    assert len(statements) == 1  # the old statement was closed to make room

    refusals.append(errors.DatabaseError(msg="full", errno=1461))
    empty = PreparedStatements(connection)
    with pytest.raises(errors.DatabaseError):  # nothing of its own to give back: refused
        empty.fetch_all("SELECT ? * 3", (1,))


@pytest.mark.mysql
@pytest.mark.integration
def test_the_provider_prepares_a_repeated_search_once(
    provider: MySqlProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same search on the same pooled connection: one prepare; the rows of every
    execution those of a statement prepared for that execution alone."""
    recorder = _Recorder(monkeypatch)
    query = issue(optional_terms=("solar",))
    first = run_query(provider, query)
    again = [run_query(provider, query) for _ in range(3)]
    assert first
    assert all(rows == first for rows in again)
    searches = [text for text in recorder.prepared if b"MATCH" in text]
    assert len(searches) == 1, searches
    # Only the first connect's one-shot statements (version, stopwords) were closed.
    assert not [i for i in recorder.closed if b"MATCH" in recorder.ids[i]]
    assert b"max_statement_time=" in searches[0] or b"MAX_EXECUTION_TIME(" in searches[0]


@given(st.floats(min_value=0.0, max_value=86_400.0, allow_nan=False))
def test_the_reusable_limit_is_never_more_and_at_most_a_tenth_less(timeout_s: float) -> None:
    limit = reusable_limit_s(timeout_s)
    assert limit >= 0.001
    assert limit * 1000 == pytest.approx(round(limit * 1000))  # whole milliseconds
    if timeout_s >= 0.001:
        assert limit <= timeout_s
        assert limit > 0.9 * (timeout_s - 0.001)


def test_budgets_that_start_alike_share_one_limit() -> None:
    assert {reusable_limit_s(s) for s in (4.999, 4.987, 4.95, 4.9001)} == {4.9}
    assert reusable_limit_s(0.0734) == 0.073
    assert reusable_limit_s(123.456) == 120.0
    with pytest.raises(ValueError, match="finite"):
        reusable_limit_s(math.inf)
