"""Classify mysql-connector-python exceptions into the sixteen provider error codes.

mysql-connector-python raises subclasses of ``mysql.connector.Error`` whose ``errno`` is the
MySQL / MariaDB error number (client-side numbers 2002-2055 for connection failures), or -1
when the driver itself has none. The number decides the code; the message is never parsed and
goes to the log only.
"""

from __future__ import annotations

from mysql.connector import Error, InterfaceError, OperationalError

from esra.core.codes import ProviderErrorCode
from esra.sql import ExecutionState

__all__ = ["ERROR_CODES", "ExecutionState", "classify", "error_number"]

_C = ProviderErrorCode

ERROR_CODES: dict[int, ProviderErrorCode] = {
    # Statement timeouts: MariaDB max_statement_time, MySQL 8 MAX_EXECUTION_TIME.
    1969: _C.TIMEOUT,  # ER_STATEMENT_TIMEOUT (MariaDB)
    3024: _C.TIMEOUT,  # ER_QUERY_TIMEOUT (MySQL)
    1317: _C.CANCELLED,  # ER_QUERY_INTERRUPTED: KILL QUERY
    # Reaching the server.
    2002: _C.CONNECTION_REFUSED,  # CR_CONNECTION_ERROR (socket)
    2003: _C.CONNECTION_REFUSED,  # CR_CONN_HOST_ERROR
    2005: _C.CONNECTION_REFUSED,  # CR_UNKNOWN_HOST
    2006: _C.CONNECTION_REFUSED,  # CR_SERVER_GONE_ERROR
    2013: _C.CONNECTION_REFUSED,  # CR_SERVER_LOST
    2055: _C.CONNECTION_REFUSED,  # CR_SERVER_LOST_EXTENDED
    1053: _C.CONNECTION_REFUSED,  # ER_SERVER_SHUTDOWN
    1927: _C.CONNECTION_REFUSED,  # ER_CONNECTION_KILLED (MariaDB)
    1081: _C.CONNECTION_REFUSED,  # ER_IPSOCK_ERROR
    # Credentials.
    1045: _C.AUTH_FAILED,  # ER_ACCESS_DENIED_ERROR
    1251: _C.AUTH_FAILED,  # ER_NOT_SUPPORTED_AUTH_MODE
    1698: _C.AUTH_FAILED,  # ER_ACCESS_DENIED_NO_PASSWORD_ERROR
    1130: _C.AUTH_FAILED,  # ER_HOST_NOT_PRIVILEGED: host may not log in
    1862: _C.AUTH_FAILED,  # ER_MUST_CHANGE_PASSWORD_LOGIN
    # Missing objects.
    1146: _C.RELATION_NOT_FOUND,  # ER_NO_SUCH_TABLE
    1049: _C.RELATION_NOT_FOUND,  # ER_BAD_DB_ERROR: the configured database
    1054: _C.RELATION_NOT_FOUND,  # ER_BAD_FIELD_ERROR: a configured column
    1109: _C.RELATION_NOT_FOUND,  # ER_UNKNOWN_TABLE
    # Privileges and read-only enforcement.
    1044: _C.PERMISSION_DENIED,  # ER_DBACCESS_DENIED_ERROR
    1142: _C.PERMISSION_DENIED,  # ER_TABLEACCESS_DENIED_ERROR
    1143: _C.PERMISSION_DENIED,  # ER_COLUMNACCESS_DENIED_ERROR
    1227: _C.PERMISSION_DENIED,  # ER_SPECIFIC_ACCESS_DENIED_ERROR
    1370: _C.PERMISSION_DENIED,  # ER_PROCACCESS_DENIED_ERROR
    1792: _C.PERMISSION_DENIED,  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
    1290: _C.PERMISSION_DENIED,  # ER_OPTION_PREVENTS_STATEMENT (--read-only)
    1036: _C.PERMISSION_DENIED,  # ER_OPEN_AS_READONLY
    1836: _C.PERMISSION_DENIED,  # ER_READ_ONLY_MODE
    # Full-text index.
    1214: _C.TEXT_INDEX_UNAVAILABLE,  # ER_TABLE_CANT_HANDLE_FT
    # 1191 ER_FT_MATCHING_KEY_NOT_FOUND is decided by ``classify`` (configuration-dependent).
    # Statement text.
    1064: _C.SYNTAX_ERROR,  # ER_PARSE_ERROR
    1149: _C.SYNTAX_ERROR,  # ER_SYNTAX_ERROR
    # A statement over one of the server's limits fails the same on every attempt: the
    # query's fault, never retried and never counted against the source's breaker.
    # ER_TOO_MANY_TABLES: more than 61 tables in one join (the validator holds plans to
    # ``MAX_SCORED_TERMS``).
    1116: _C.SYNTAX_ERROR,
    1390: _C.SYNTAX_ERROR,  # ER_PS_MANY_PARAM: more than 65,535 placeholders
    1104: _C.SYNTAX_ERROR,  # ER_TOO_BIG_SELECT: would examine more than max_join_size rows
    # A value the column's character set cannot hold (an emoji against a ``utf8mb3``
    # column: the session binds ``utf8mb4``) cannot be compared with it, on every attempt
    # alike. As UNKNOWN it counted against the breaker: an emoji in any caller's search
    # would have taken a legacy source away from every caller.
    1267: _C.SYNTAX_ERROR,  # ER_CANT_AGGREGATE_2COLLATIONS
    1270: _C.SYNTAX_ERROR,  # ER_CANT_AGGREGATE_3COLLATIONS
    1271: _C.SYNTAX_ERROR,  # ER_CANT_AGGREGATE_NCOLLATIONS
    # Capacity.
    1040: _C.RESOURCE_EXHAUSTED,  # ER_CON_COUNT_ERROR
    1203: _C.RESOURCE_EXHAUSTED,  # ER_TOO_MANY_USER_CONNECTIONS
    1226: _C.RESOURCE_EXHAUSTED,  # ER_USER_LIMIT_REACHED
    1205: _C.RESOURCE_EXHAUSTED,  # ER_LOCK_WAIT_TIMEOUT
    1213: _C.RESOURCE_EXHAUSTED,  # ER_LOCK_DEADLOCK
    1206: _C.RESOURCE_EXHAUSTED,  # ER_LOCK_TABLE_FULL
    1037: _C.RESOURCE_EXHAUSTED,  # ER_OUTOFMEMORY
    1038: _C.RESOURCE_EXHAUSTED,  # ER_OUT_OF_SORTMEMORY
    1041: _C.RESOURCE_EXHAUSTED,  # ER_OUT_OF_RESOURCES
    1114: _C.RESOURCE_EXHAUSTED,  # ER_RECORD_FILE_FULL
    1021: _C.RESOURCE_EXHAUSTED,  # ER_DISK_FULL
}


def error_number(exc: BaseException) -> int | None:
    """Return the server / client error number of a driver exception, if it has one."""
    if isinstance(exc, Error) and isinstance(exc.errno, int) and exc.errno > 0:
        return exc.errno
    return None


def _connection_failure(exc: BaseException) -> bool:
    """The driver's "no usable connection" without a number of the table: an
    ``InterfaceError`` (the driver's class for the socket, TLS and the handshake) or an
    ``OperationalError`` without a number ("MySQL Connection not available": closed under
    us)."""
    if isinstance(exc, InterfaceError):
        return error_number(exc) not in ERROR_CODES
    return isinstance(exc, OperationalError) and error_number(exc) is None


def classify(
    exc: BaseException, *, has_text_index: bool = True, state: ExecutionState | None = None
) -> ProviderErrorCode:
    """Return the provider error code for ``exc``.

    Args:
        exc: the exception mysql-connector-python (or the socket under it) raised.
        has_text_index: whether the mapping configures a text index. Error 1191 (no FULLTEXT
            index matching the MATCH column list) is ``COLUMN_NOT_INDEXED`` when it does —
            the configured index does not cover exactly the searchable columns — and
            ``TEXT_INDEX_UNAVAILABLE`` when it does not.
        state: the execution's deadline/cancellation flags: a ``KILL QUERY`` sent because the
            client-side deadline passed (not because of cancellation) is a ``TIMEOUT``.
    """
    if _connection_failure(exc):
        return _C.CONNECTION_REFUSED
    number = error_number(exc)
    if number is None:
        if isinstance(exc, ConnectionError | TimeoutError):
            return _C.CONNECTION_REFUSED
        return _C.UNKNOWN
    if number == 1191:
        return _C.COLUMN_NOT_INDEXED if has_text_index else _C.TEXT_INDEX_UNAVAILABLE
    if number == 1317 and state is not None and state.timed_out and not state.cancelled:
        return _C.TIMEOUT
    return ERROR_CODES.get(number, _C.UNKNOWN)


def is_connection_lost(exc: BaseException) -> bool:
    """Whether the connection that raised ``exc`` can no longer be used."""
    if isinstance(exc, InterfaceError) or _connection_failure(exc):
        return True
    return error_number(exc) in {2006, 2013, 2055, 1053, 1927}
