"""The injection property for Oracle, proved with ~19,000 real SQL-injection payloads.

python-oracledb binds values server-side, so the command text is what matters: it is
byte-identical whatever the required, optional, phrase, filter and claim slots hold. The
Oracle Text expression (one bound value) is checked too: every payload appears in it only
as escaped ``{tokens}``.

Queries are issued with ``_issue`` on purpose, bypassing the validator.
"""

from __future__ import annotations

import pytest

from esra.core._pipeline.values import ValidatedQuery
from esra.oracle import OracleTextFullText
from esra.oracle._fulltext import oracle_text_term
from esra.oracle._provider import oracle_dialect
from esra.sql import StatementBuilder
from tests._external import load_sqli_payloads
from tests._injection import assert_every_slot_compiles_to_the_benign_text, payload_query
from tests.oracle.conftest import uncached_builder
from tests.oracle.test_fulltext import _only_operators

pytestmark = pytest.mark.external_data


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    """Every non-empty payload line, decoded with surrogateescape."""
    return load_sqli_payloads()


def _query(*, required: str = "solar", **slots: str) -> ValidatedQuery:
    """Every slot filled; the required term is also excluded."""
    return payload_query(required=required, excluded=(required,), **slots)


def test_every_payload_in_every_slot_compiles_to_the_benign_text(payloads: list[str]) -> None:
    """All five slots at once, then each slot alone over a spread: identical templates."""
    assert_every_slot_compiles_to_the_benign_text(uncached_builder, _query, payloads)


def test_every_payload_is_escaped_in_the_text_expression(payloads: list[str]) -> None:
    """In the bound CONTAINS expression each payload is escaped tokens, never an operator."""
    builder = StatementBuilder(oracle_dialect(), OracleTextFullText())
    for payload in payloads:
        built = builder.build(_query(required=payload, optional=payload, phrase=payload))
        expression = built.params["q"]
        assert isinstance(expression, str)
        assert _only_operators(expression), payload
        assert oracle_text_term(payload) in expression
        assert built.params["f0_0"] == "energy"
