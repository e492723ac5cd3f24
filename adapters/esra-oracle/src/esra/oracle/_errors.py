"""Classify python-oracledb exceptions into the sixteen provider error codes.

oracledb raises ``oracledb.Error`` subclasses whose ``args[0]`` is an ``_Error`` carrying
``full_code`` (``ORA-00942``, ``DPY-6005``...), ``code`` (the ORA number, 0 for DPY) and
``message``. Oracle Text failures arrive wrapped (``ORA-29902`` / ``ORA-20000``) with the
real cause as a ``DRG-`` code in the message, so DRG codes decide first, then every ORA code
in the error, then the DPY code. The message is parsed for codes only and otherwise goes to
the log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping as MappingABC

import oracledb

from esra.core.codes import ProviderErrorCode
from esra.sql import ExecutionState

__all__ = [
    "DPY_ERROR_CODES",
    "DRG_ERROR_CODES",
    "ORA_ERROR_CODES",
    "ExecutionState",
    "classify",
    "error_codes",
]

_P = ProviderErrorCode

ORA_ERROR_CODES: MappingABC[int, ProviderErrorCode] = {
    942: _P.RELATION_NOT_FOUND,  # table or view does not exist
    904: _P.RELATION_NOT_FOUND,  # invalid identifier (a configured column is gone)
    4043: _P.RELATION_NOT_FOUND,  # object does not exist
    1031: _P.PERMISSION_DENIED,  # insufficient privileges
    1456: _P.PERMISSION_DENIED,  # may not insert/update/delete inside a READ ONLY transaction
    1017: _P.AUTH_FAILED,  # invalid username/password; logon denied
    1045: _P.AUTH_FAILED,  # user lacks CREATE SESSION privilege
    28000: _P.AUTH_FAILED,  # the account is locked
    28001: _P.AUTH_FAILED,  # the password has expired
    12541: _P.CONNECTION_REFUSED,  # no listener
    12514: _P.CONNECTION_REFUSED,  # listener does not know the service
    12505: _P.CONNECTION_REFUSED,  # listener does not know the SID
    12170: _P.CONNECTION_REFUSED,  # connect timeout
    12537: _P.CONNECTION_REFUSED,  # connection closed
    3113: _P.CONNECTION_REFUSED,  # end-of-file on communication channel
    3114: _P.CONNECTION_REFUSED,  # not connected to Oracle
    3135: _P.CONNECTION_REFUSED,  # connection lost contact
    1013: _P.CANCELLED,  # user requested cancel (TIMEOUT when the deadline caused it)
    40: _P.TIMEOUT,  # active time limit exceeded - call aborted (Resource Manager)
    56735: _P.TIMEOUT,  # elapsed time limit exceeded - call aborted (Resource Manager)
    29861: _P.TEXT_INDEX_UNAVAILABLE,  # domain index is marked LOADING/FAILED/UNUSABLE
    29868: _P.TEXT_INDEX_UNAVAILABLE,  # domain index marked LOADING
    29902: _P.SYNTAX_ERROR,  # error in ODCIIndexStart (the DRG code refines it)
    907: _P.SYNTAX_ERROR,  # missing right parenthesis
    933: _P.SYNTAX_ERROR,  # SQL command not properly ended
    936: _P.SYNTAX_ERROR,  # missing expression
    # A statement over one of the server's limits fails the same on every attempt: the
    # query's fault, never retried and never counted against the source's breaker.
    1795: _P.SYNTAX_ERROR,  # maximum number of expressions in a list is 1000
    939: _P.SYNTAX_ERROR,  # too many arguments for function
    # A value the column's type cannot take (a filter value, a claim) fails the same on
    # every attempt: the query's fault, as PostgreSQL's class 22 is. As UNKNOWN it counted
    # against the breaker, so one caller's values could take the source from every caller.
    1722: _P.SYNTAX_ERROR,  # invalid number
    1858: _P.SYNTAX_ERROR,  # a non-numeric character was found where a numeric was expected
    1861: _P.SYNTAX_ERROR,  # literal does not match format string
    1843: _P.SYNTAX_ERROR,  # not a valid month
    1847: _P.SYNTAX_ERROR,  # day of month must be between 1 and last day of month
    1830: _P.SYNTAX_ERROR,  # date format picture ends before converting entire input string
    1841: _P.SYNTAX_ERROR,  # (full) year must be between -4713 and +9999, and not be 0
    1426: _P.SYNTAX_ERROR,  # numeric overflow
    1460: _P.SYNTAX_ERROR,  # unimplemented or unreasonable conversion requested
    1489: _P.SYNTAX_ERROR,  # result of string concatenation is too long
    18: _P.RESOURCE_EXHAUSTED,  # maximum number of sessions exceeded
    20: _P.RESOURCE_EXHAUSTED,  # maximum number of processes exceeded
    1652: _P.RESOURCE_EXHAUSTED,  # unable to extend temp segment
    4031: _P.RESOURCE_EXHAUSTED,  # unable to allocate shared memory
    4036: _P.RESOURCE_EXHAUSTED,  # PGA memory exceeds PGA_AGGREGATE_LIMIT
    8177: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # can't serialize access for this transaction
    1555: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # snapshot too old
    1466: _P.SNAPSHOT_ISOLATION_UNAVAILABLE,  # table definition changed (read-only txn)
}

DRG_ERROR_CODES: MappingABC[int, ProviderErrorCode] = {
    10599: _P.COLUMN_NOT_INDEXED,  # column is not indexed
    10849: _P.TEXT_INDEX_UNAVAILABLE,  # catsearch does not support functional invocation
    10502: _P.TEXT_INDEX_UNAVAILABLE,  # index does not exist
    10700: _P.TEXT_INDEX_UNAVAILABLE,  # preference does not exist
    50900: _P.SYNTAX_ERROR,  # text query parser error
    50901: _P.SYNTAX_ERROR,  # text query parser syntax error
    # Wildcard query expansion resulted in too many terms: the same on every attempt.
    51030: _P.SYNTAX_ERROR,
    # A query token over 256 bytes (86 CJK characters without a space): the same on every
    # attempt, however the error is wrapped (ORA-20000 alone when evaluated functionally).
    50943: _P.SYNTAX_ERROR,
}

DPY_ERROR_CODES: MappingABC[int, ProviderErrorCode] = {
    4024: _P.TIMEOUT,  # call timeout exceeded (call_timeout)
    4011: _P.CONNECTION_REFUSED,  # the database or network closed the connection
    1001: _P.CONNECTION_REFUSED,  # not connected to database
    6000: _P.CONNECTION_REFUSED,  # listener refused the connection
    6001: _P.CONNECTION_REFUSED,  # service not registered with the listener
    6003: _P.CONNECTION_REFUSED,  # SID not registered with the listener
    6005: _P.CONNECTION_REFUSED,  # cannot connect to database
}

_CODE = re.compile(r"\b(ORA|DRG|DPY)-(\d{4,5})\b")


def error_codes(exc: BaseException) -> dict[str, tuple[int, ...]]:
    """Return every ``ORA``/``DRG``/``DPY`` number in ``exc``, in order, by prefix."""
    found: dict[str, list[int]] = {"ORA": [], "DRG": [], "DPY": []}
    error = exc.args[0] if exc.args else None
    full_code = getattr(error, "full_code", "") or ""
    message = getattr(error, "message", None) or str(exc)
    for prefix, number in _CODE.findall(f"{full_code}\n{message}"):
        if int(number) not in found[prefix]:
            found[prefix].append(int(number))
    code = getattr(error, "code", 0)
    if isinstance(code, int) and code and code not in found["ORA"]:
        found["ORA"].insert(0, code)
    return {prefix: tuple(numbers) for prefix, numbers in found.items()}


def classify(exc: BaseException, *, state: ExecutionState | None = None) -> ProviderErrorCode:
    """Return the provider error code for ``exc``, raised by python-oracledb.

    A cancellation recorded in ``state`` is ``CANCELLED``; a deadline is ``TIMEOUT`` (the
    driver reports both as ``ORA-01013`` or ``DPY-4024``). Anything unrecognised, or not an
    oracledb error, is ``UNKNOWN``.
    """
    if state is not None and state.cancelled:
        return _P.CANCELLED
    if state is not None and state.timed_out:
        return _P.TIMEOUT
    if not isinstance(exc, oracledb.Error):
        return _P.UNKNOWN
    codes = error_codes(exc)
    for prefix, table in (
        ("DRG", DRG_ERROR_CODES),
        ("DPY", DPY_ERROR_CODES),
        ("ORA", ORA_ERROR_CODES),
    ):
        for number in codes[prefix]:
            if number in table:
                return table[number]
    if 20000 in codes["ORA"] or codes["DRG"]:
        return _P.TEXT_INDEX_UNAVAILABLE  # an Oracle Text error this table does not name
    return _P.UNKNOWN
