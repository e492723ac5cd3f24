"""The injection property for SQL Server, proved with ~19,000 real SQL-injection payloads.

Two levels. (1) The command template the builder compiles is byte-identical whatever the
content of the required, optional, phrase, filter and claim slots. (2) pymssql substitutes
parameters on the client, so the batch that actually goes to the server is checked too:
with every ``N'...'`` / ``'...'`` literal lexed out, it is byte-identical to the benign
batch — each payload ended up inside exactly one string literal.

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads): the builder and the provider must be safe for a path that forgets it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pymssql import _mssql

from esra.core.validation import ValidatedQuery
from esra.sql import StatementBuilder
from esra.sqlserver import SqlServerFullText, bindable, sqlserver_dialect
from tests._external import load_sqli_payloads
from tests._injection import SLOTS, assert_every_slot_compiles_to_the_benign_text, payload_query
from tests.sqlserver.conftest import uncached_builder

pytestmark = pytest.mark.external_data

# A T-SQL string literal: optional N prefix, quotes doubled inside, may span lines.
_LITERAL = re.compile(rb"N?'(?:[^']|'')*'", re.DOTALL)


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def _query(*, required: str = "solar", **slots: str) -> ValidatedQuery:
    """Every slot filled; the required term is also excluded."""
    return payload_query(required=required, excluded=(required,), **slots)


_CACHED = StatementBuilder(sqlserver_dialect(), SqlServerFullText())


def _wire(query: ValidatedQuery) -> bytes:
    """The batch pymssql would send, with every string literal replaced by ``?``.

    The template is proven identical by the test above; this builder reuses it (cached by
    shape) so only the substitution is exercised per payload.
    """
    built = _CACHED.build(query)
    params: dict[str, Any] = {k: bindable(v) for k, v in built.params.items()}
    batch = _mssql.substitute_params(built.sql, params)
    return _LITERAL.sub(b"?", batch)


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """All five slots at once, then each slot alone over a spread: identical templates."""
    assert_every_slot_compiles_to_the_benign_text(uncached_builder(), _query, payloads)


def test_every_payload_stays_inside_one_literal_on_the_wire(payloads: list[str]) -> None:
    """After pymssql's client-side substitution, each payload is confined to its literal."""
    benign = _wire(_query())
    assert benign.count(b"?") == 6  # t0, tp0, q, tx0, f0_0, r0_0
    for payload in payloads:
        assert _wire(_query(**dict.fromkeys(SLOTS, payload))) == benign, payload


def test_the_wire_check_would_catch_an_unquoted_value() -> None:
    """Guard: a value spliced into the text unquoted does change the lexed batch."""
    built = uncached_builder().build(_query())
    spliced = built.sql.replace("%(r0_0)s", "1 OR 1=1")
    params: dict[str, Any] = {k: v for k, v in built.params.items() if k != "r0_0"}
    assert _LITERAL.sub(b"?", _mssql.substitute_params(spliced, params)) != _wire(_query())
