"""Classification of mysql-connector-python's real exceptions by MySQL / MariaDB error number.

The table is checked entry by entry (MySQL 8-only numbers such as 3024 are tested this way
only: no MySQL 8 server runs here); the live part provokes real errors on the MariaDB server,
through the provider's own prepared-statement path where a statement is involved, and
classifies the exceptions the driver actually raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mysql.connector import errors
from mysql.connector.connection import MySQLConnection

from esra.core.codes import ProviderErrorCode as C
from esra.mysql._errors import (
    ERROR_CODES,
    ExecutionState,
    classify,
    error_number,
    is_connection_lost,
)
from esra.mysql._prepared import fetch_all
from tests.mysql.conftest import Server


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1969, C.TIMEOUT), (3024, C.TIMEOUT), (1317, C.CANCELLED),
        (2002, C.CONNECTION_REFUSED), (2003, C.CONNECTION_REFUSED),
        (2006, C.CONNECTION_REFUSED), (2013, C.CONNECTION_REFUSED),
        (1045, C.AUTH_FAILED), (1146, C.RELATION_NOT_FOUND),
        (1142, C.PERMISSION_DENIED), (1143, C.PERMISSION_DENIED), (1044, C.PERMISSION_DENIED),
        (1792, C.PERMISSION_DENIED), (1290, C.PERMISSION_DENIED),
        (1064, C.SYNTAX_ERROR), (1116, C.SYNTAX_ERROR), (1390, C.SYNTAX_ERROR),
        (1104, C.SYNTAX_ERROR),
        (1040, C.RESOURCE_EXHAUSTED), (1203, C.RESOURCE_EXHAUSTED),
        (1205, C.RESOURCE_EXHAUSTED), (1213, C.RESOURCE_EXHAUSTED),
        (1214, C.TEXT_INDEX_UNAVAILABLE), (9999, C.UNKNOWN),
    ],
)  # fmt: skip
def test_error_numbers_classify(number: int, expected: C) -> None:
    """Each documented error number maps to its code; an unknown number is UNKNOWN."""
    exc = errors.OperationalError(msg="driver text", errno=number)
    assert classify(exc) is expected
    assert error_number(exc) == number


def test_the_table_only_holds_codes_of_the_closed_set() -> None:
    """No table entry invents a code, and 1191 is decided by configuration, not the table."""
    assert set(ERROR_CODES.values()) <= set(C)
    assert 1191 not in ERROR_CODES


def test_missing_fulltext_index_depends_on_configuration() -> None:
    """1191 is COLUMN_NOT_INDEXED with a configured index, TEXT_INDEX_UNAVAILABLE without."""
    exc = errors.DatabaseError(msg="Can't find FULLTEXT index matching the column list", errno=1191)
    assert classify(exc, has_text_index=True) is C.COLUMN_NOT_INDEXED
    assert classify(exc, has_text_index=False) is C.TEXT_INDEX_UNAVAILABLE


def test_a_kill_after_the_client_deadline_is_a_timeout() -> None:
    """1317 after the backstop deadline is TIMEOUT; after a cancellation it is CANCELLED."""
    exc = errors.DatabaseError(msg="Query execution was interrupted", errno=1317)
    assert classify(exc, state=ExecutionState(timed_out=True)) is C.TIMEOUT
    assert classify(exc, state=ExecutionState(timed_out=True, cancelled=True)) is C.CANCELLED
    assert classify(exc) is C.CANCELLED


def test_unnumbered_exceptions() -> None:
    """The driver's own connection failures (no number, or a client number outside the table)
    are CONNECTION_REFUSED and end the connection; anything foreign is UNKNOWN."""
    closed = errors.OperationalError("MySQL Connection not available")
    assert classify(closed) is C.CONNECTION_REFUSED
    assert is_connection_lost(closed)
    tls = errors.InterfaceError(msg="TLS handshake failed", errno=2026)
    assert classify(tls) is C.CONNECTION_REFUSED
    assert is_connection_lost(tls)
    assert classify(ConnectionResetError()) is C.CONNECTION_REFUSED
    assert classify(ValueError("x")) is C.UNKNOWN
    assert classify(errors.ProgrammingError("no number")) is C.UNKNOWN
    assert not is_connection_lost(errors.ProgrammingError(msg="syntax", errno=1064))


def _raised(action: Callable[[], Any]) -> BaseException:
    with pytest.raises(errors.Error) as raised:
        action()
    return raised.value


def _connect(**options: Any) -> MySQLConnection:
    return MySQLConnection(ssl_disabled=True, **options)


@pytest.mark.mysql
@pytest.mark.integration
def test_real_driver_errors_classify(server: Server, database: str) -> None:
    """Errors provoked on the live server, as the driver raised them, get the expected code."""
    with server.connect(database) as connection:
        with connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE esra_tmp (a TEXT, b TEXT) ENGINE=InnoDB")
        cases: dict[str, tuple[tuple[object, ...], C]] = {
            "SELEC ?": ((1,), C.SYNTAX_ERROR),
            "SELECT * FROM esra_no_such_db_zz.esra_no_such_table": ((), C.RELATION_NOT_FOUND),
            "SELECT nope FROM esra_tmp": ((), C.RELATION_NOT_FOUND),
            "SELECT MATCH(a) AGAINST (?) FROM esra_tmp": (("x",), C.COLUMN_NOT_INDEXED),
            "SET STATEMENT max_statement_time=0.2 FOR SELECT COUNT(*) "
            "FROM seq_1_to_100000000000 WHERE MOD(seq, 7) = ?": ((9,), C.TIMEOUT),
            # A statement over a server limit: the query's fault, the same on every attempt.
            "SELECT 1 FROM esra_tmp WHERE a IN (" + ",".join("?" * 70_000) + ")": (
                tuple(range(70_000)),
                C.SYNTAX_ERROR,
            ),
            "SET STATEMENT max_join_size=1 FOR SELECT 1 FROM seq_1_to_10 x, seq_1_to_10 y "
            "WHERE x.seq > ?": ((0,), C.SYNTAX_ERROR),
        }
        for sql, (values, expected) in cases.items():
            with pytest.raises(errors.Error) as raised:
                fetch_all(connection, sql, values)
            failure = raised.value
            assert classify(failure) is expected, sql
            assert not is_connection_lost(failure), sql
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE esra_plain (a TEXT) ENGINE=InnoDB")
            cursor.execute("START TRANSACTION READ ONLY")
            write = _raised(
                lambda: fetch_all(connection, "INSERT INTO esra_plain VALUES (?)", ("x",))
            )
            cursor.execute("ROLLBACK")
            cursor.execute("DROP TABLE esra_plain")
    assert classify(write) is C.PERMISSION_DENIED
    refused = _raised(lambda: _connect(host="127.0.0.1", port=1, connection_timeout=2))
    assert classify(refused) is C.CONNECTION_REFUSED
    denied = _raised(
        lambda: _connect(
            host=server.host, port=server.port, user="esra_no_such_user_zz", password="x"
        )
    )
    assert classify(denied) is C.AUTH_FAILED


@pytest.mark.mysql
@pytest.mark.integration
def test_a_connection_killed_under_the_provider_is_lost(server: Server, database: str) -> None:
    """A session the server killed fails the next statement as CONNECTION_REFUSED, and the
    provider drops that connection rather than reuse it."""
    with server.connect(database) as victim, server.connect() as admin:
        with admin.cursor() as cursor:
            cursor.execute(f"KILL CONNECTION {int(victim.connection_id or 0)}")
        lost = _raised(lambda: fetch_all(victim, "SELECT ?", (1,)))
    assert classify(lost) is C.CONNECTION_REFUSED
    assert is_connection_lost(lost)
