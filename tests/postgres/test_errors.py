"""Tests for esra.postgres._errors: psycopg's real exception classes map onto the codes."""

from __future__ import annotations

import psycopg
import psycopg_pool
import pytest
from psycopg import errors as pg_errors

from esra.core.codes import ProviderErrorCode
from esra.postgres._errors import (
    ExecutionState,
    classify,
    classify_connect_failure,
    classify_sqlstate,
    server_text,
)

_P = ProviderErrorCode


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (pg_errors.InvalidPassword, _P.AUTH_FAILED),
        (pg_errors.InvalidAuthorizationSpecification, _P.AUTH_FAILED),
        (pg_errors.UndefinedTable, _P.RELATION_NOT_FOUND),
        (pg_errors.InvalidSchemaName, _P.RELATION_NOT_FOUND),
        (pg_errors.InsufficientPrivilege, _P.PERMISSION_DENIED),
        (pg_errors.ReadOnlySqlTransaction, _P.PERMISSION_DENIED),
        (pg_errors.SyntaxError, _P.SYNTAX_ERROR),
        (pg_errors.InvalidTextRepresentation, _P.SYNTAX_ERROR),
        (pg_errors.UndefinedFunction, _P.COLUMN_NOT_INDEXED),
        (pg_errors.DatatypeMismatch, _P.COLUMN_NOT_INDEXED),
        (pg_errors.UndefinedObject, _P.TEXT_INDEX_UNAVAILABLE),
        (pg_errors.TooManyConnections, _P.RESOURCE_EXHAUSTED),
        (pg_errors.OutOfMemory, _P.RESOURCE_EXHAUSTED),
        (pg_errors.DiskFull, _P.RESOURCE_EXHAUSTED),
        # Class 54, program limits: the statement's own, the same on every attempt.
        (pg_errors.ProgramLimitExceeded, _P.SYNTAX_ERROR),
        (pg_errors.StatementTooComplex, _P.SYNTAX_ERROR),
        (pg_errors.TooManyColumns, _P.SYNTAX_ERROR),
        (pg_errors.TooManyArguments, _P.SYNTAX_ERROR),
        (pg_errors.DeadlockDetected, _P.RESOURCE_EXHAUSTED),
        (pg_errors.SerializationFailure, _P.SNAPSHOT_ISOLATION_UNAVAILABLE),
        (pg_errors.SnapshotTooOld, _P.SNAPSHOT_ISOLATION_UNAVAILABLE),
        (pg_errors.AdminShutdown, _P.CONNECTION_REFUSED),
        (pg_errors.CannotConnectNow, _P.CONNECTION_REFUSED),
        (pg_errors.InvalidCatalogName, _P.CONNECTION_REFUSED),
        (pg_errors.ConnectionFailure, _P.CONNECTION_REFUSED),
        (pg_errors.DivisionByZero, _P.SYNTAX_ERROR),
        (pg_errors.RaiseException, _P.UNKNOWN),
        (pg_errors.InternalError_, _P.UNKNOWN),
    ],
)
def test_sqlstates_classify(error: type[psycopg.Error], expected: ProviderErrorCode) -> None:
    """Each real psycopg error class (by its SQLSTATE) maps to its code."""
    assert classify(error("server text")) is expected
    assert error.sqlstate is not None
    if error is not pg_errors.QueryCanceled:
        assert classify_sqlstate(error.sqlstate) is expected


def test_query_canceled_is_timeout_only_when_our_deadline_passed() -> None:
    """57014 is TIMEOUT past our deadline, CANCELLED when we (or anyone else) cancelled."""
    exc = pg_errors.QueryCanceled("canceling statement")
    assert classify(exc, state=ExecutionState(timed_out=True)) is _P.TIMEOUT
    assert classify(exc, state=ExecutionState()) is _P.CANCELLED
    both = ExecutionState(timed_out=True, cancelled=True)
    assert classify(exc, state=both) is _P.CANCELLED
    assert classify(exc) is _P.CANCELLED


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            'connection to server at "127.0.0.1", port 1 failed: Connection refused',
            _P.CONNECTION_REFUSED,
        ),
        ('FATAL:  password authentication failed for user "esra"', _P.AUTH_FAILED),
        ('FATAL:  role "nobody" does not exist', _P.AUTH_FAILED),
        ('FATAL:  role "r" is not permitted to log in', _P.AUTH_FAILED),
        ('FATAL:  no pg_hba.conf entry for host "10.0.0.1"', _P.AUTH_FAILED),
        ("fe_sendauth: no password supplied\npassword is required", _P.AUTH_FAILED),
        ('FATAL:  database "nosuch" does not exist', _P.CONNECTION_REFUSED),
        ("FATAL:  sorry, too many connections for role", _P.RESOURCE_EXHAUSTED),
        ("FATAL:  remaining connection slots are reserved", _P.RESOURCE_EXHAUSTED),
        ("timeout expired", _P.CONNECTION_REFUSED),
    ],
)
def test_connect_failures_classify(message: str, expected: ProviderErrorCode) -> None:
    """libpq's connect failures carry no SQLSTATE: their text decides (English messages)."""
    assert classify_connect_failure(message) is expected
    assert classify(psycopg.OperationalError(f"connection failed: {message}")) is expected


def test_pool_errors_classify() -> None:
    """A busy pool is RESOURCE_EXHAUSTED; a closed one CANCELLED."""
    assert classify(psycopg_pool.PoolTimeout("busy")) is _P.RESOURCE_EXHAUSTED
    assert classify(psycopg_pool.TooManyRequests("queue")) is _P.RESOURCE_EXHAUSTED
    assert classify(psycopg_pool.PoolClosed("closed")) is _P.CANCELLED


def test_client_side_data_errors_and_foreign_exceptions() -> None:
    """A value psycopg refuses is SYNTAX_ERROR; anything not from psycopg is UNKNOWN."""
    assert classify(psycopg.DataError("NUL byte")) is _P.SYNTAX_ERROR
    assert classify(ValueError("relation does not exist")) is _P.UNKNOWN
    assert classify(psycopg.ProgrammingError("client misuse")) is _P.UNKNOWN


def test_server_text_numbers_placeholders_as_psycopg_sends_them() -> None:
    """Error positions count in the server's text: ``%(name)s`` → ``$n`` by first use."""
    statement = "SELECT %(a)s, x %% 2, %(b)s, %(a)s"
    assert server_text(statement) == "SELECT $1, x % 2, $2, $1"
