"""The builder's ``pyformat`` text read back as the text MySQL prepares (``?`` placeholders)."""

from __future__ import annotations

import pytest

from esra.mysql import MatchAgainstFullText
from esra.mysql._placeholders import prepared_text
from esra.mysql._quote import DIALECT
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._injection import issue


def test_placeholders_become_question_marks_in_order() -> None:
    """Each ``%(name)s`` is a ``?``, named in order (a repeated name repeats its value)."""
    text = prepared_text("SELECT a FROM t WHERE a = %(x)s AND b LIKE %(y)s OR c = %(x)s")
    assert text.sql == "SELECT a FROM t WHERE a = ? AND b LIKE ? OR c = ?"
    assert text.names == ("x", "y", "x")
    assert text.values({"x": 1, "y": "z"}) == (1, "z", 1)


def test_doubled_percent_is_one_percent_and_never_a_placeholder() -> None:
    """``%%`` inside a quoted identifier is one ``%``, even before ``(name)s``."""
    text = prepared_text("SELECT `a%%(x)s` FROM `50%%` WHERE b = %(x)s")
    assert text.sql == "SELECT `a%(x)s` FROM `50%` WHERE b = ?"
    assert text.names == ("x",)


def test_a_lone_percent_is_refused() -> None:
    """Text that is not the builder's ``pyformat`` is an error, never sent half-read."""
    with pytest.raises(ValueError, match="lone"):
        prepared_text("SELECT 5 % 2")


def test_a_missing_value_is_refused() -> None:
    with pytest.raises(KeyError):
        prepared_text("SELECT %(x)s").values({})


def test_a_built_statement_prepares_without_a_value() -> None:
    """The whole search statement: no ``%(`` left, one value per ``?``, none in the text."""
    builder = StatementBuilder(DIALECT, MatchAgainstFullText(), cache=CompiledStatementCache(0))
    built = builder.build(issue(required_terms=("zqxterm",), optional_terms=("zqxopt",)))
    text = prepared_text(built.sql)
    assert "%(" not in text.sql
    assert "zqx" not in text.sql
    assert text.sql.count("?") == len(text.names)
    assert {"zqxterm", "zqxopt"} <= {v for v in text.values(built.params) if isinstance(v, str)}
