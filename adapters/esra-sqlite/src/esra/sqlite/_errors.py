"""Classify ``sqlite3`` exceptions into the sixteen provider error codes.

The driver's text is used here to tell cases apart and then goes to the log only; the code
is all that leaves the provider.
"""

from __future__ import annotations

import re
import sqlite3

from esra.core.codes import ProviderErrorCode
from esra.sql import ExecutionState

__all__ = ["ExecutionState", "classify"]

_MISSING = re.compile(r"no such (?:table|column): (.+)$", re.DOTALL)

# SQLite's limits on one statement (its compile-time limits, a pattern's, a value's size):
# hit on every attempt alike, so the query's own fault (``SYNTAX_ERROR``), never retried and
# never counted against the source's breaker, as UNKNOWN and RESOURCE_EXHAUSTED were.
_STATEMENT_LIMITS = (
    "too many sql variables",
    "expression tree is too large",
    "parser stack overflow",
    "too many terms in compound select",
    "tables in a join",
    "too many columns",
    "too many arguments on function",
    "too many from clause terms",
    "like or glob pattern too complex",
    "string or blob too big",
)

_BY_ERRORNAME: dict[str, ProviderErrorCode] = {
    "SQLITE_BUSY": ProviderErrorCode.RESOURCE_EXHAUSTED,
    "SQLITE_LOCKED": ProviderErrorCode.RESOURCE_EXHAUSTED,
    "SQLITE_NOMEM": ProviderErrorCode.RESOURCE_EXHAUSTED,
    "SQLITE_FULL": ProviderErrorCode.RESOURCE_EXHAUSTED,
    "SQLITE_TOOBIG": ProviderErrorCode.SYNTAX_ERROR,
    "SQLITE_CANTOPEN": ProviderErrorCode.CONNECTION_REFUSED,
    "SQLITE_NOTADB": ProviderErrorCode.CONNECTION_REFUSED,
    "SQLITE_READONLY": ProviderErrorCode.PERMISSION_DENIED,
    "SQLITE_AUTH": ProviderErrorCode.PERMISSION_DENIED,
    "SQLITE_PERM": ProviderErrorCode.PERMISSION_DENIED,
    "SQLITE_CORRUPT": ProviderErrorCode.TEXT_INDEX_UNAVAILABLE,
}


def classify(
    exc: BaseException, *, text_index: str | None, state: ExecutionState | None = None
) -> ProviderErrorCode:
    """Return the provider error code for ``exc`` raised while searching.

    Args:
        exc: the exception from ``sqlite3``.
        text_index: the mapping's FTS table name, to tell a missing index from a missing
            relation.
        state: the execution's deadline/cancellation flags, to classify an interrupt.
    """
    if not isinstance(exc, sqlite3.Error):
        return ProviderErrorCode.UNKNOWN
    message = str(exc).lower()
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name == "SQLITE_INTERRUPT" or message == "interrupted":
        if state is not None and state.timed_out and not state.cancelled:
            return ProviderErrorCode.TIMEOUT
        return ProviderErrorCode.CANCELLED
    if "database is locked" in message or "database table is locked" in message:
        return ProviderErrorCode.RESOURCE_EXHAUSTED
    if "unable to open" in message:
        return ProviderErrorCode.CONNECTION_REFUSED
    if "readonly" in message or "read-only" in message or "not authorized" in message:
        return ProviderErrorCode.PERMISSION_DENIED
    missing = _MISSING.search(str(exc))
    if missing is not None:
        return _missing(missing.group(1), text_index)
    if "no such function" in message or "no such module: fts5" in message:
        return ProviderErrorCode.TEXT_INDEX_UNAVAILABLE
    if message.startswith("fts5: syntax error") or "unterminated string" in message:
        return ProviderErrorCode.SYNTAX_ERROR
    if any(limit in message for limit in _STATEMENT_LIMITS):
        return ProviderErrorCode.SYNTAX_ERROR
    if message.startswith("fts5:"):
        # "fts5: missing row N from content table" and friends: the index is out of step.
        return ProviderErrorCode.TEXT_INDEX_UNAVAILABLE
    return _BY_ERRORNAME.get(name, ProviderErrorCode.UNKNOWN)


def _missing(name: str, text_index: str | None) -> ProviderErrorCode:
    """A missing FTS table (or a text index that is no FTS table, or one without the
    ``_docsize`` table a caller-scored search counts its rows in) vs a missing relation."""
    # SQLite names the object as written, possibly schema- or table-qualified.
    if text_index is not None and any(
        name == index or name.endswith("." + index)
        for index in (text_index, f"{text_index}_docsize")
    ):
        return ProviderErrorCode.TEXT_INDEX_UNAVAILABLE
    return ProviderErrorCode.RELATION_NOT_FOUND
