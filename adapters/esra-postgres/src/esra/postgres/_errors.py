"""Classify psycopg and psycopg_pool exceptions into the sixteen provider error codes.

Decisions are made on psycopg's exception classes and the server's SQLSTATE (``exc.sqlstate``,
language-independent). Which column a 42703 names is read from the error's
``statement_position`` within our own statement, not from its message. The one text-based
rule is for failures to *connect*, which libpq reports without any SQLSTATE
(``classify_connect_failure``). Driver text goes to the log only (by the caller); the code
is all that leaves.

=====================================================  ===============================
SQLSTATE / exception                                   code
=====================================================  ===============================
57014 query_canceled, our deadline passed               TIMEOUT
57014 query_canceled, otherwise (we or an admin)        CANCELLED
``psycopg_pool.PoolTimeout``, pool has no connection    (the connect error's own code)
``psycopg_pool.PoolTimeout``, every connection busy     RESOURCE_EXHAUSTED
28P01 invalid_password, 28000 invalid_authorization     AUTH_FAILED
08xxx, 57P01-57P03, 3D000, lost connections            CONNECTION_REFUSED
connect failure text: authentication / login refused    AUTH_FAILED
connect failure text: too many connections              RESOURCE_EXHAUSTED
connect failure, anything else (refused, unreachable)   CONNECTION_REFUSED
42P01 undefined_table, 3F000 invalid_schema_name        RELATION_NOT_FOUND
42703 undefined_column at the text-index column         TEXT_INDEX_UNAVAILABLE
42703 undefined_column elsewhere                        RELATION_NOT_FOUND
42704 undefined_object (a text search configuration)    TEXT_INDEX_UNAVAILABLE
42883 undefined_function, 42804 datatype_mismatch       COLUMN_NOT_INDEXED
42501 insufficient_privilege, 25006 read_only_sql_tx    PERMISSION_DENIED
42601 syntax_error, 22xxx data, 54xxx program limits   SYNTAX_ERROR
53xxx insufficient_resources, 40P01, 55P03              RESOURCE_EXHAUSTED
40001 serialization_failure, 72000 snapshot_too_old     SNAPSHOT_ISOLATION_UNAVAILABLE
anything else                                           UNKNOWN
=====================================================  ===============================
"""

from __future__ import annotations

import re

import psycopg
import psycopg_pool
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from esra.core.codes import ProviderErrorCode
from esra.sql import ExecutionState

__all__ = ["ExecutionState", "classify", "classify_connect_failure", "classify_sqlstate"]

_P = ProviderErrorCode
_PREPARER = psycopg_dialect.dialect().identifier_preparer  # type: ignore[no-untyped-call]
_IDENT = r'(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)'

_EXACT: dict[str, ProviderErrorCode] = {
    "28P01": _P.AUTH_FAILED,
    "28000": _P.AUTH_FAILED,
    "3D000": _P.CONNECTION_REFUSED,  # the database named in the template does not exist
    "57P01": _P.CONNECTION_REFUSED,  # admin_shutdown
    "57P02": _P.CONNECTION_REFUSED,  # crash_shutdown
    "57P03": _P.CONNECTION_REFUSED,  # cannot_connect_now (starting up, recovery)
    "42P01": _P.RELATION_NOT_FOUND,
    "3F000": _P.RELATION_NOT_FOUND,  # the configured schema does not exist
    "42704": _P.TEXT_INDEX_UNAVAILABLE,  # e.g. text search configuration does not exist
    "42883": _P.COLUMN_NOT_INDEXED,  # ts_rank(text, ...): the column is no tsvector
    "42804": _P.COLUMN_NOT_INDEXED,
    "42501": _P.PERMISSION_DENIED,
    "25006": _P.PERMISSION_DENIED,  # a write refused by the read-only transaction
    "42601": _P.SYNTAX_ERROR,
    "40P01": _P.RESOURCE_EXHAUSTED,  # deadlock_detected: contention, retryable
    "55P03": _P.RESOURCE_EXHAUSTED,  # lock_not_available
    "40001": _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # also "conflict with recovery" on standbys
    "72000": _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # snapshot_too_old
}

_BY_CLASS: dict[str, ProviderErrorCode] = {
    "08": _P.CONNECTION_REFUSED,
    "53": _P.RESOURCE_EXHAUSTED,
    # Program limits are the statement's own (a target list of more than 1,664 entries, an
    # expression too deep, a tsquery too large): the same on every attempt, so the query's
    # fault, never retried and never counted against the source's breaker.
    "54": _P.SYNTAX_ERROR,
    "22": _P.SYNTAX_ERROR,
}


_AUTH_MARKERS = (
    "password authentication failed",  # 28P01
    "authentication failed for user",  # 28000 / 28P01 (ident, peer, gss, cert...)
    "is not permitted to log in",  # 28000: NOLOGIN role
    "no pg_hba.conf entry",  # 28000
    "password is required",  # libpq: server asked for one, none was given
    "pg_hba.conf rejects connection",  # 28000
)
_NO_ROLE = re.compile(r'role "[^\n]*" does not exist')  # 28000
_LIMIT_MARKERS = ("too many connections", "remaining connection slots are reserved")


def classify_sqlstate(sqlstate: str) -> ProviderErrorCode:
    """Return the code for a server SQLSTATE (57014 needs ``classify`` and its state)."""
    exact = _EXACT.get(sqlstate)
    if exact is not None:
        return exact
    return _BY_CLASS.get(sqlstate[:2], _P.UNKNOWN)


def classify(
    exc: BaseException,
    *,
    text_index: str | None = None,
    statement: str | None = None,
    state: ExecutionState | None = None,
) -> ProviderErrorCode:
    """Return the provider error code for ``exc``.

    Args:
        exc: a ``psycopg.Error`` or ``psycopg_pool`` error raised while connecting or searching.
        text_index: the mapping's tsvector column, to tell a missing text index (42703 at
            that column) from any other missing column.
        statement: the command text that failed, for the 42703 position check.
        state: the execution's deadline/cancellation flags, to classify a 57014:
            ``timed_out`` when its ``timeout_s`` ran out (our ``statement_timeout``),
            ``cancelled`` when the provider itself cancelled it (task cancellation, close).
    """
    if isinstance(exc, psycopg_pool.PoolTimeout):
        # Reached only when the pool held connections that were all busy; a pool that could
        # not connect at all is diagnosed by the provider with a direct connection attempt.
        return _P.RESOURCE_EXHAUSTED
    if isinstance(exc, psycopg_pool.TooManyRequests):
        return _P.RESOURCE_EXHAUSTED
    if isinstance(exc, psycopg_pool.PoolClosed):
        return _P.CANCELLED
    if not isinstance(exc, psycopg.Error):
        return _P.UNKNOWN
    sqlstate = exc.sqlstate or ""
    if sqlstate == "57014" or isinstance(exc, psycopg.errors.QueryCanceled):
        if state is not None and state.timed_out and not state.cancelled:
            return _P.TIMEOUT
        return _P.CANCELLED
    if sqlstate == "42703":
        return _undefined_column(exc, text_index, statement)
    if sqlstate:
        return classify_sqlstate(sqlstate)
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        # libpq reports connect failures and lost connections without a SQLSTATE.
        return classify_connect_failure(str(exc))
    if isinstance(exc, psycopg.DataError):
        # Client-side: a value psycopg cannot send (the provider scrubs NUL and surrogates).
        return _P.SYNTAX_ERROR
    return _P.UNKNOWN


def classify_connect_failure(message: str) -> ProviderErrorCode:
    """Classify a failure to connect, which libpq reports as text without a SQLSTATE.

    This is the one text-based rule, because libpq exposes no SQLSTATE for startup errors:
    the server's English (``lc_messages`` C/en) authentication and connection-limit
    messages are recognised; anything else — refused, unreachable, timed out, a database
    that does not exist, a server starting up — is ``CONNECTION_REFUSED``.
    """
    lowered = message.lower()
    if any(marker in lowered for marker in _AUTH_MARKERS) or _NO_ROLE.search(lowered):
        return _P.AUTH_FAILED
    if any(marker in lowered for marker in _LIMIT_MARKERS):
        return _P.RESOURCE_EXHAUSTED
    return _P.CONNECTION_REFUSED


_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


def server_text(statement: str) -> str:
    """Return ``statement`` as the server receives it, where error positions point.

    psycopg sends ``%(name)s`` as ``$n``, numbering names by first appearance (a repeated
    name keeps its number), and ``%%`` as ``%``: positions past a placeholder shift.
    """
    numbers: dict[str, int] = {}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        return f"${numbers.setdefault(name, len(numbers) + 1)}"

    return _PLACEHOLDER.sub(replace, statement)


def _undefined_column(
    exc: psycopg.Error, text_index: str | None, statement: str | None
) -> ProviderErrorCode:
    """42703 pointing at the text-index column is a missing index; any other, a bad mapping."""
    if text_index is None:
        return _P.RELATION_NOT_FOUND
    position = exc.diag.statement_position
    if statement is not None and position is not None and position.isdigit():
        at = server_text(statement)[int(position) - 1 :]
        # The builder renders the vector as <alias>.<name quoted by the dialect>.
        quoted = re.escape(_PREPARER.quote(text_index))
        if re.match(rf"(?:{_IDENT}\.)?{quoted}(?![\w$])", at):
            return _P.TEXT_INDEX_UNAVAILABLE
        return _P.RELATION_NOT_FOUND
    # No position (unexpected): fall back to the column name the server quoted.
    primary = exc.diag.message_primary or ""
    return _P.TEXT_INDEX_UNAVAILABLE if text_index in primary else _P.RELATION_NOT_FOUND
