"""The injection property for SQL Server, proved with ~19,000 real SQL-injection payloads.

Two levels. (1) The command template the builder compiles is byte-identical whatever the
content of the required, optional, phrase, filter and claim slots. (2) What goes to the
server is an ``sp_executesql`` RPC: its ``@stmt`` and ``@params`` are byte-identical to the
benign call's, and each payload is exactly one bound parameter value (``test_rpc`` proves
the driver calls themselves against a recording ``_mssql`` connection).

Queries are issued with ``_issue`` on purpose, bypassing the validator (which would reject
most payloads): the builder and the provider must be safe for a path that forgets it.
"""

from __future__ import annotations

from typing import Any

import pytest

from esra.core._pipeline.values import ValidatedQuery
from esra.sql import StatementBuilder
from esra.sqlserver import SqlServerFullText
from esra.sqlserver._fulltext import containstable_phrase, freetext_string
from esra.sqlserver._provider import bindable, sqlserver_dialect
from esra.sqlserver._rpc import MAX_NVARCHAR_UNITS, RpcLimitError, rpc_statement
from tests._external import load_sqli_payloads
from tests._injection import SLOTS, assert_every_slot_compiles_to_the_benign_text, payload_query
from tests.sqlserver.conftest import uncached_builder

pytestmark = pytest.mark.external_data


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def _query(*, required: str = "solar", **slots: str) -> ValidatedQuery:
    """Every slot filled; the required term is also excluded."""
    return payload_query(required=required, excluded=(required,), **slots)


_CACHED = StatementBuilder(sqlserver_dialect(), SqlServerFullText())


def _call(query: ValidatedQuery) -> tuple[str, str, dict[str, Any]]:
    """``@stmt``, ``@params`` and the bound values of the RPC the provider would send.

    The template is proven identical by the test above; this builder reuses it (cached by
    shape) so only the binding is exercised per payload.
    """
    built = _CACHED.build(query)
    statement = rpc_statement(built.sql, {k: bindable(v) for k, v in built.params.items()})
    values = {p.name: p.value for p in statement.parameters}
    return statement.text, statement.definition, values


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """All five slots at once, then each slot alone over a spread: identical templates."""
    assert_every_slot_compiles_to_the_benign_text(uncached_builder, _query, payloads)


def test_every_payload_is_one_bound_value_of_an_identical_call(payloads: list[str]) -> None:
    """@stmt and @params never change; each slot's payload is exactly its own RPC value."""
    text, definition, benign = _call(_query())
    assert list(benign) == ["@t0", "@tp0", "@q", "@tx0", "@f0_0", "@r0_0", "@lim"]
    refused = 0
    for payload in payloads:
        if _utf16_units(containstable_phrase(str(bindable(payload)))) > MAX_NVARCHAR_UNITS:
            # Too long for one RPC parameter: refused whole, never truncated on the wire.
            with pytest.raises(RpcLimitError):
                _call(_query(**dict.fromkeys(SLOTS, payload)))
            refused += 1
            continue
        hostile_text, hostile_definition, values = _call(_query(**dict.fromkeys(SLOTS, payload)))
        assert (hostile_text, hostile_definition) == (text, definition), payload
        safe = str(bindable(payload))
        assert values["@f0_0"] == values["@r0_0"] == safe, payload
        assert values["@t0"] == values["@tp0"] == values["@tx0"] == containstable_phrase(safe)
        assert values["@q"] == freetext_string((safe,))
    assert refused < len(payloads) // 1000  # the corpus is exercised, not skipped


def _utf16_units(text: object) -> int:
    return len(str(text).encode("utf-16-le", "surrogatepass")) // 2
