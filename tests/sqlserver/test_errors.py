"""Tests for esra.sqlserver._errors: real pymssql exceptions map onto the sixteen codes."""

from __future__ import annotations

import pymssql
import pytest
from pymssql import _mssql

from esra.core.codes import ProviderErrorCode
from esra.sqlserver._errors import (
    DBLIB_ERROR_CODES,
    SQLSERVER_ERROR_CODES,
    ExecutionState,
    classify,
    error_numbers,
)

_P = ProviderErrorCode
_GENERAL = (
    b"DB-Lib error message 20018, severity 16:\n"
    b"General SQL Server error: Check messages from the SQL Server\n"
)


def test_a_refused_connection_is_classified_from_the_real_driver_error() -> None:
    """pymssql's own error for a closed port (DB-Lib 20009) is CONNECTION_REFUSED."""
    with pytest.raises(pymssql.OperationalError) as raised:
        pymssql.connect(server="127.0.0.1", port="1", user="u", password="p", login_timeout=2)
    assert 20009 in error_numbers(raised.value)[1]
    assert classify(raised.value) is _P.CONNECTION_REFUSED


@pytest.mark.parametrize(("number", "expected"), sorted(SQLSERVER_ERROR_CODES.items()))
@pytest.mark.parametrize("kind", [pymssql.OperationalError, pymssql.DatabaseError])
def test_every_mapped_server_number(
    kind: type[pymssql.Error], number: int, expected: ProviderErrorCode
) -> None:
    """A server error as pymssql raises it — (number, text + DB-Lib 20018) — maps by number."""
    # pymssql raises Error((number, text)); both argument shapes are accepted.
    assert classify(kind((number, b"Some server text." + _GENERAL))) is expected
    assert classify(kind(number, b"Some server text." + _GENERAL)) is expected


@pytest.mark.parametrize("number", [191, 8003, 8623, 8632])
def test_a_statement_over_a_server_limit_is_the_querys_fault(number: int) -> None:
    """Nesting, parameters, a plan too complex, an expression limit: the same on every
    attempt, so SYNTAX_ERROR, which is neither retried nor counted against the breaker."""
    assert classify(pymssql.OperationalError((number, b"Limit." + _GENERAL))) is _P.SYNTAX_ERROR


@pytest.mark.parametrize(("number", "expected"), sorted(DBLIB_ERROR_CODES.items()))
def test_every_mapped_dblib_number(number: int, expected: ProviderErrorCode) -> None:
    """A client-side DB-Lib error maps by its number."""
    text = f"DB-Lib error message {number}, severity 9:\nsomething\n".encode()
    assert classify(pymssql.OperationalError(number, text)) is expected


def test_a_stale_server_number_beside_dblib_errors_is_not_trusted() -> None:
    """(701, 'DB-Lib 20003 ... 20002') is a connect timeout, not out-of-memory."""
    text = (
        b"DB-Lib error message 20003, severity 6:\nAdaptive Server connection timed out\n"
        b"DB-Lib error message 20002, severity 9:\nAdaptive Server connection failed\n"
    )
    assert classify(pymssql.OperationalError(701, text)) is _P.TIMEOUT


def test_login_failed_wins_over_the_connection_failure_it_causes() -> None:
    """18456 with 20018 and 20002 in the text is AUTH_FAILED."""
    text = b"Login failed for user 'x'." + _GENERAL + b"DB-Lib error message 20002, severity 9:\n"
    assert classify(pymssql.OperationalError(18456, text)) is _P.AUTH_FAILED


def test_7601_on_a_column_is_column_not_indexed() -> None:
    """The same number names a table or a column; the column case is COLUMN_NOT_INDEXED."""
    column = b"Cannot use a CONTAINS or FREETEXT predicate on column 'x' because it is not"
    table = b"Cannot use a CONTAINS or FREETEXT predicate on table or indexed view 'x' because"
    assert classify(pymssql.OperationalError(7601, column + _GENERAL)) is _P.COLUMN_NOT_INDEXED
    assert classify(pymssql.OperationalError(7601, table + _GENERAL)) is _P.TEXT_INDEX_UNAVAILABLE


def test_the_execution_state_decides_first() -> None:
    """A deadline or a cancellation explains whatever the driver reported."""
    exc = pymssql.OperationalError(20047, b"DB-Lib error message 20047, severity 9:\n")
    assert classify(exc, state=ExecutionState(timed_out=True)) is _P.TIMEOUT
    assert classify(exc, state=ExecutionState(cancelled=True, timed_out=True)) is _P.CANCELLED


def test_mssql_level_exception_and_interface_errors() -> None:
    """_mssql's exception classes are understood; a closed connection is CONNECTION_REFUSED."""
    assert classify(_mssql.MSSQLDriverException("Connection is closed")) is _P.UNKNOWN
    assert classify(pymssql.InterfaceError("Connection is closed.")) is _P.CONNECTION_REFUSED


def test_unknown_numbers_and_foreign_exceptions_are_unknown() -> None:
    """Anything unforeseen is UNKNOWN, never a guess."""
    assert classify(pymssql.OperationalError(99999, b"odd" + _GENERAL)) is _P.UNKNOWN
    assert classify(ValueError("208")) is _P.UNKNOWN
