"""Classify pymssql exceptions into the sixteen provider error codes by error number.

pymssql raises ``pymssql.OperationalError`` / ``DatabaseError`` (and ``_mssql``'s
``MSSQLDatabaseException``) with ``args == ((number, message_bytes),)``. ``number`` is the SQL
Server error number when the server sent one — the message then carries FreeTDS's
``DB-Lib error message 20018`` ("General SQL Server error: Check messages from the SQL
Server") — and otherwise a DB-Lib (client) number such as 20009. When only DB-Lib errors
occurred, ``number`` may be a stale server number from an earlier message, so it is trusted
only beside 20018; the DB-Lib numbers in the text decide otherwise.

The text is parsed for numbers only; it goes to the log, never into the error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import Mapping as MappingABC

import pymssql
from pymssql import _mssql

from esra.core.codes import ProviderErrorCode
from esra.sql import ExecutionState

__all__ = [
    "DBLIB_ERROR_CODES",
    "SQLSERVER_ERROR_CODES",
    "ExecutionState",
    "classify",
    "error_numbers",
]

_P = ProviderErrorCode

# SQL Server (server-side) error numbers.
SQLSERVER_ERROR_CODES: MappingABC[int, ProviderErrorCode] = {
    208: _P.RELATION_NOT_FOUND,  # Invalid object name
    207: _P.RELATION_NOT_FOUND,  # Invalid column name (the configured column is gone)
    4060: _P.AUTH_FAILED,  # Cannot open database requested by the login
    18452: _P.AUTH_FAILED,  # Login from an untrusted domain
    18456: _P.AUTH_FAILED,  # Login failed for user
    18486: _P.AUTH_FAILED,  # Account locked out
    18488: _P.AUTH_FAILED,  # Password must be changed
    229: _P.PERMISSION_DENIED,  # permission denied on object
    230: _P.PERMISSION_DENIED,  # permission denied on column
    262: _P.PERMISSION_DENIED,  # permission denied in database (e.g. CREATE TABLE)
    297: _P.PERMISSION_DENIED,  # user does not have permission to perform this action
    3906: _P.PERMISSION_DENIED,  # database is read-only
    7601: _P.TEXT_INDEX_UNAVAILABLE,  # not full-text indexed (COLUMN_NOT_INDEXED for a column)
    7609: _P.TEXT_INDEX_UNAVAILABLE,  # Full-Text Search is not installed
    7616: _P.TEXT_INDEX_UNAVAILABLE,  # Full-Text Search is not enabled for this database
    9928: _P.TEXT_INDEX_UNAVAILABLE,  # full-text component failure
    7630: _P.SYNTAX_ERROR,  # syntax error in the full-text search condition
    7645: _P.SYNTAX_ERROR,  # null or empty full-text predicate
    102: _P.SYNTAX_ERROR,  # Incorrect syntax near
    105: _P.SYNTAX_ERROR,  # Unclosed quotation mark
    156: _P.SYNTAX_ERROR,  # Incorrect syntax near the keyword
    # A statement over one of the server's limits fails the same on every attempt: the
    # query's fault, never retried and never counted against the source's breaker.
    191: _P.SYNTAX_ERROR,  # some part of the statement is nested too deeply
    8003: _P.SYNTAX_ERROR,  # too many parameters (2,100 at most)
    8623: _P.SYNTAX_ERROR,  # the query processor could not produce a plan (too complex)
    8632: _P.SYNTAX_ERROR,  # an expression services limit has been reached
    # A value the column's type cannot take (a filter value, a claim) fails the same on
    # every attempt: the query's fault, as PostgreSQL's class 22 is. As UNKNOWN it counted
    # against the breaker, so one caller's values could take the source from every caller.
    241: _P.SYNTAX_ERROR,  # conversion failed: date and/or time from character string
    242: _P.SYNTAX_ERROR,  # character string to datetime: out-of-range value
    245: _P.SYNTAX_ERROR,  # conversion failed when converting a value to data type int
    8114: _P.SYNTAX_ERROR,  # error converting data type (e.g. nvarchar to numeric)
    8115: _P.SYNTAX_ERROR,  # arithmetic overflow error converting expression to data type
    220: _P.SYNTAX_ERROR,  # arithmetic overflow error for data type
    1222: _P.TIMEOUT,  # Lock request time out period exceeded (SET LOCK_TIMEOUT)
    3980: _P.CANCELLED,  # batch aborted by an abort signal from the client
    3951: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # transaction did not start in snapshot isolation
    3952: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # snapshot isolation not allowed in this database
    3960: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # snapshot update conflict
    3961: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # snapshot: object changed by DDL meanwhile
    701: _P.RESOURCE_EXHAUSTED,  # insufficient system memory
    1204: _P.RESOURCE_EXHAUSTED,  # cannot obtain a LOCK resource
    1205: _P.RESOURCE_EXHAUSTED,  # chosen as deadlock victim (worth a retry)
    8645: _P.RESOURCE_EXHAUSTED,  # timeout waiting for memory resources
    10928: _P.RESOURCE_EXHAUSTED,  # Azure SQL resource limit reached
    10929: _P.RESOURCE_EXHAUSTED,  # Azure SQL resource guarantee not met
}

# FreeTDS DB-Lib (client-side) error numbers.
DBLIB_ERROR_CODES: MappingABC[int, ProviderErrorCode] = {
    20003: _P.TIMEOUT,  # Adaptive Server connection timed out (query timeout)
    20002: _P.CONNECTION_REFUSED,  # Adaptive Server connection failed
    20004: _P.CONNECTION_REFUSED,  # Read from the server failed
    20006: _P.CONNECTION_REFUSED,  # Write to the server failed
    20009: _P.CONNECTION_REFUSED,  # Unable to connect: server unavailable or does not exist
    20017: _P.CONNECTION_REFUSED,  # Unexpected EOF from the server
    20047: _P.CONNECTION_REFUSED,  # DBPROCESS is dead or not enabled
}

_GENERAL_SERVER_ERROR = 20018  # "Check messages from the SQL Server": args[0] is the server's
_DBLIB = re.compile(rb"DB-Lib error message (\d+)")
_SERVER = re.compile(rb"SQL Server message (\d+)")


def _args(exc: BaseException) -> tuple[object, ...]:
    """pymssql raises ``Error((number, text))`` (one tuple) or ``Error(number, text)``."""
    args = exc.args
    if len(args) == 1 and isinstance(args[0], tuple):
        return tuple(args[0])
    return tuple(args)


def _message_bytes(exc: BaseException) -> bytes:
    parts: list[bytes] = []
    for arg in _args(exc):
        if isinstance(arg, bytes):
            parts.append(arg)
        elif isinstance(arg, str):
            parts.append(arg.encode("utf-8", "replace"))
    return b"\n".join(parts)


def error_numbers(exc: BaseException) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Return ``(server_numbers, dblib_numbers)`` found in a pymssql exception."""
    text = _message_bytes(exc)
    dblib = [int(n) for n in _DBLIB.findall(text)]
    server = [int(n) for n in _SERVER.findall(text)]
    args = _args(exc)
    number = args[0] if args and isinstance(args[0], int) else None
    number = getattr(exc, "number", number)
    if isinstance(number, int):
        if number >= 20000:
            dblib.insert(0, number)
        elif _GENERAL_SERVER_ERROR in dblib or not dblib:
            server.insert(0, number)
    return tuple(server), tuple(dblib)


def _first(numbers: Iterable[int], table: MappingABC[int, ProviderErrorCode]) -> int | None:
    return next((n for n in numbers if n in table), None)


def classify(exc: BaseException, *, state: ExecutionState | None = None) -> ProviderErrorCode:
    """Return the provider error code for ``exc``, raised by pymssql while searching.

    A deadline or cancellation recorded in ``state`` decides first: the driver reports both
    as a timeout or a dead connection. Unrecognised numbers, and anything that is not a
    pymssql error, are ``UNKNOWN``.
    """
    if state is not None and state.cancelled:
        return _P.CANCELLED
    if state is not None and state.timed_out:
        return _P.TIMEOUT
    if not isinstance(exc, pymssql.Error | _mssql.MSSQLException):
        return _P.UNKNOWN
    if isinstance(exc, pymssql.InterfaceError):
        return _P.CONNECTION_REFUSED  # e.g. "Connection is closed."
    server, dblib = error_numbers(exc)
    number = _first(server, SQLSERVER_ERROR_CODES)
    if number is not None:
        if number == 7601 and b"on column" in _message_bytes(exc):
            return _P.COLUMN_NOT_INDEXED
        return SQLSERVER_ERROR_CODES[number]
    number = _first(dblib, DBLIB_ERROR_CODES)
    if number is not None:
        return DBLIB_ERROR_CODES[number]
    return _P.UNKNOWN
