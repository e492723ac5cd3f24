"""Tests for esra.sqlite._errors: sqlite3 failures map onto the sixteen provider codes."""

from __future__ import annotations

import sqlite3

import pytest

from esra.core.codes import ProviderErrorCode
from esra.sqlite._errors import ExecutionState, classify

_P = ProviderErrorCode


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("no such table: main.articles", _P.RELATION_NOT_FOUND),
        ("no such table: articles_fts", _P.TEXT_INDEX_UNAVAILABLE),
        ("no such table: main.articles_fts", _P.TEXT_INDEX_UNAVAILABLE),
        # An FTS5 table made with columnsize=0 has no _docsize to count its rows in.
        ("no such table: articles_fts_docsize", _P.TEXT_INDEX_UNAVAILABLE),
        ("no such column: articles_fts.articles_fts", _P.TEXT_INDEX_UNAVAILABLE),
        ("no such column: b.art_title", _P.RELATION_NOT_FOUND),
        ("no such function: bm25", _P.TEXT_INDEX_UNAVAILABLE),
        ('fts5: syntax error near "AND"', _P.SYNTAX_ERROR),
        ("unterminated string", _P.SYNTAX_ERROR),
        ("fts5: missing row 3 from content table 'main'.'articles'", _P.TEXT_INDEX_UNAVAILABLE),
        ("database is locked", _P.RESOURCE_EXHAUSTED),
        ("database table is locked", _P.RESOURCE_EXHAUSTED),
        ("unable to open database file", _P.CONNECTION_REFUSED),
        ("attempt to write a readonly database", _P.PERMISSION_DENIED),
        ("not authorized", _P.PERMISSION_DENIED),
        ("interrupted", _P.CANCELLED),
        ("something nobody anticipated", _P.UNKNOWN),
    ],
)
def test_messages_classify(message: str, expected: ProviderErrorCode) -> None:
    """Each driver message maps to its code; anything unforeseen is UNKNOWN."""
    exc = sqlite3.OperationalError(message)
    assert classify(exc, text_index="articles_fts") is expected


def test_interrupt_past_the_deadline_is_a_timeout() -> None:
    """An interrupt the deadline caused is TIMEOUT; one a cancellation caused is CANCELLED."""
    exc = sqlite3.OperationalError("interrupted")
    assert classify(exc, text_index=None, state=ExecutionState(timed_out=True)) is _P.TIMEOUT
    cancelled = ExecutionState(timed_out=True, cancelled=True)
    assert classify(exc, text_index=None, state=cancelled) is _P.CANCELLED


_OVER_A_LIMIT = {
    "variables": ("SELECT 1 WHERE 1 IN (" + ",".join("?" * 1_000) + ")", tuple(range(1_000))),
    "nesting": ("SELECT " + "(" * 1_100 + "1" + ")" * 1_100, ()),
    "expression depth": ("SELECT " + "+".join("1" * 1_100), ()),
    "compound": (" UNION ALL ".join(["SELECT 1"] * 600), ()),
    "join": ("SELECT 1 FROM " + ",".join(f"(SELECT 1) t{i}" for i in range(70)), ()),
    "columns": ("SELECT " + ",".join("1" * 2_100), ()),
    "value size": ("SELECT zeroblob(2000000000)", ()),
    "pattern": ("SELECT 'a' LIKE ?", ("%" * 60_000,)),
}


@pytest.mark.parametrize("case", list(_OVER_A_LIMIT))
def test_a_statement_over_a_limit_is_the_querys_fault(case: str) -> None:
    """A statement over one of SQLite's limits fails the same on every attempt: SYNTAX_ERROR,
    the code the executor neither retries nor counts against the source's breaker."""
    sql, params = _OVER_A_LIMIT[case]
    connection = sqlite3.connect(":memory:")
    # Builds differ in how many variables they take (32,766 by default, 250,000 in Debian's).
    connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    try:
        with pytest.raises(sqlite3.Error) as raised:
            connection.execute(sql, params).fetchall()
    finally:
        connection.close()
    assert classify(raised.value, text_index=None) is _P.SYNTAX_ERROR, str(raised.value)


def test_error_names_classify_when_the_message_says_little() -> None:
    """The SQLite result-code name decides when the text is not specific."""
    exc = sqlite3.OperationalError("disk I/O trouble")
    exc.sqlite_errorname = "SQLITE_FULL"
    assert classify(exc, text_index=None) is _P.RESOURCE_EXHAUSTED


def test_non_sqlite_exceptions_are_unknown() -> None:
    """Only sqlite3 errors are classified by content; anything else is UNKNOWN."""
    assert classify(ValueError("no such table: x"), text_index=None) is _P.UNKNOWN
