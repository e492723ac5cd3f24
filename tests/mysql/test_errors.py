"""Classification of PyMySQL's real exceptions by MySQL / MariaDB error number.

The table is checked entry by entry (MySQL 8-only numbers such as 3024 are tested this way
only: no MySQL 8 server runs here); the live part provokes real errors on the MariaDB server
and classifies the exceptions PyMySQL actually raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from esra.core.codes import ProviderErrorCode as C
from esra.mysql._errors import ERROR_CODES, ExecutionState, classify, error_number
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
        (1064, C.SYNTAX_ERROR),
        (1040, C.RESOURCE_EXHAUSTED), (1203, C.RESOURCE_EXHAUSTED),
        (1205, C.RESOURCE_EXHAUSTED), (1213, C.RESOURCE_EXHAUSTED),
        (1214, C.TEXT_INDEX_UNAVAILABLE), (9999, C.UNKNOWN),
    ],
)  # fmt: skip
def test_error_numbers_classify(number: int, expected: C) -> None:
    """Each documented error number maps to its code; an unknown number is UNKNOWN."""
    exc = pymysql.err.OperationalError(number, "driver text")
    assert classify(exc) is expected
    assert error_number(exc) == number


def test_the_table_only_holds_codes_of_the_closed_set() -> None:
    """No table entry invents a code, and 1191 is decided by configuration, not the table."""
    assert set(ERROR_CODES.values()) <= set(C)
    assert 1191 not in ERROR_CODES


def test_missing_fulltext_index_depends_on_configuration() -> None:
    """1191 is COLUMN_NOT_INDEXED with a configured index, TEXT_INDEX_UNAVAILABLE without."""
    exc = pymysql.err.InternalError(1191, "Can't find FULLTEXT index matching the column list")
    assert classify(exc, has_text_index=True) is C.COLUMN_NOT_INDEXED
    assert classify(exc, has_text_index=False) is C.TEXT_INDEX_UNAVAILABLE


def test_a_kill_after_the_client_deadline_is_a_timeout() -> None:
    """1317 after the backstop deadline is TIMEOUT; after a cancellation it is CANCELLED."""
    exc = pymysql.err.OperationalError(1317, "Query execution was interrupted")
    assert classify(exc, state=ExecutionState(timed_out=True)) is C.TIMEOUT
    assert classify(exc, state=ExecutionState(timed_out=True, cancelled=True)) is C.CANCELLED
    assert classify(exc) is C.CANCELLED


def test_non_driver_exceptions() -> None:
    """A closed connection is CONNECTION_REFUSED; anything foreign is UNKNOWN."""
    assert classify(pymysql.err.InterfaceError(0, "")) is C.CONNECTION_REFUSED
    assert classify(ConnectionResetError()) is C.CONNECTION_REFUSED
    assert classify(ValueError("x")) is C.UNKNOWN
    assert classify(pymysql.err.ProgrammingError("no number")) is C.UNKNOWN


def _raised(action: Callable[[], Any]) -> BaseException:
    with pytest.raises(pymysql.err.MySQLError) as raised:
        action()
    return raised.value


@pytest.mark.mysql
@pytest.mark.integration
def test_real_driver_errors_classify(server: Server, database: str) -> None:
    """Errors provoked on the live server, as PyMySQL raised them, get the expected code."""
    with server.connect(database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE esra_tmp (a TEXT, b TEXT) ENGINE=InnoDB", {})
        cases = {
            "SELEC 1": C.SYNTAX_ERROR,
            "SELECT * FROM esra_no_such_db_zz.esra_no_such_table": C.RELATION_NOT_FOUND,
            "SELECT nope FROM esra_tmp": C.RELATION_NOT_FOUND,
            "SELECT MATCH(a) AGAINST ('x') FROM esra_tmp": C.COLUMN_NOT_INDEXED,
            "SET STATEMENT max_statement_time=0.2 FOR SELECT COUNT(*) "
            "FROM seq_1_to_100000000000 WHERE MOD(seq, 7) = 9": C.TIMEOUT,
        }
        for sql, expected in cases.items():
            with pytest.raises(pymysql.err.MySQLError) as raised:
                cursor.execute(sql, {})
            assert classify(raised.value) is expected, sql
        cursor.execute("CREATE TABLE esra_plain (a TEXT) ENGINE=InnoDB", {})
        cursor.execute("START TRANSACTION READ ONLY")
        write = _raised(lambda: cursor.execute("INSERT INTO esra_plain VALUES ('x')", {}))
        cursor.execute("ROLLBACK")
        cursor.execute("DROP TABLE esra_plain", {})
    assert classify(write) is C.PERMISSION_DENIED
    refused = _raised(lambda: pymysql.connect(host="127.0.0.1", port=1, connect_timeout=2))
    assert classify(refused) is C.CONNECTION_REFUSED
    denied = _raised(
        lambda: pymysql.connect(
            host=server.host, port=server.port, user="esra_no_such_user_zz", password="x"
        )
    )
    assert classify(denied) is C.AUTH_FAILED
