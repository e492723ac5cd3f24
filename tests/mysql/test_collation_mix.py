"""A search value the column's character set cannot hold is the query's fault, not the source's.

A legacy table in ``utf8mb3`` (MySQL's ``utf8``) cannot hold a character outside the Basic
Multilingual Plane — an emoji, 𝑥 — and the provider's session binds its values as
``utf8mb4``: comparing such a value with such a column is error 1267 ("Illegal mix of
collations"; 1270/1271 for ``IN``), on every attempt alike. It was ``UNKNOWN``, which the
execution stage counts against the source's circuit breaker, so any caller could take a
legacy source away from everyone by putting an emoji in a few searches. It is
``SYNTAX_ERROR``: the query's fault, never counted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from esra.core._config.mapping import FieldType, Operator
from esra.core._pipeline.values import ValidatedQuery
from esra.core._query import ResolvedFilter
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.mysql import MySqlProvider
from esra.mysql._errors import classify
from esra.mysql._quote import quote_identifier
from tests._injection import issue
from tests.mysql.conftest import Server, close_now, create_database, drop_database, seed_contract

pytestmark = [pytest.mark.mysql, pytest.mark.integration]

OUTSIDE_BMP = "solar \U0001f600"


@pytest.fixture(scope="module")
def legacy_database(server: Server) -> Iterator[str]:
    """The contract dataset in a table converted to ``utf8mb3``, its index kept."""
    name = create_database(server)
    seed_contract(server, name)
    table = quote_identifier(CONTRACT_MAPPING.relation)
    with server.connect(name) as connection, connection.cursor() as cursor:
        cursor.execute(
            f"ALTER TABLE {table} CONVERT TO CHARACTER SET utf8mb3 COLLATE utf8mb3_general_ci"
        )
    yield name
    drop_database(server, name)


@pytest.fixture
def legacy(server: Server, legacy_database: str) -> Iterator[MySqlProvider]:
    provider = server.provider(legacy_database, mappings=(CONTRACT_MAPPING,))
    yield provider
    close_now(provider)


def _category(operator: Operator, *values: str) -> ResolvedFilter:
    return ResolvedFilter("art_category", FieldType.TEXT, operator, values)


QUERIES: dict[str, ValidatedQuery] = {
    "required": issue(required_terms=(OUTSIDE_BMP,)),
    "optional": issue(optional_terms=(OUTSIDE_BMP, "inverter")),
    "phrase": issue(phrases=(OUTSIDE_BMP,)),
    "excluded": issue(optional_terms=("solar",), excluded_terms=(OUTSIDE_BMP,)),
    "filter": issue(filters=(_category(Operator.EQ, "energy\U0001f600"),)),
    "filter in": issue(filters=(_category(Operator.IN, "energy", "x\U0001f600"),)),
    "claim": issue(
        record_filters=(ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("\U0001f600",)),)
    ),
}


@pytest.mark.parametrize("slot", sorted(QUERIES))
async def test_a_value_a_legacy_column_cannot_hold_is_a_query_fault(
    legacy: MySqlProvider, slot: str
) -> None:
    """Whether it fails (an optional term MATCH alone sees may not): never as the source's."""
    code = None
    try:
        await legacy.execute(QUERIES[slot], timeout_s=10.0)
    except ProviderError as exc:
        code = exc.code
    assert code in (None, ProviderErrorCode.SYNTAX_ERROR), slot


@pytest.mark.parametrize("errno", [1267, 1270, 1271])
def test_an_illegal_mix_of_collations_is_a_syntax_error(errno: int) -> None:
    import mysql.connector

    exc = mysql.connector.DatabaseError(msg="Illegal mix of collations", errno=errno)
    assert classify(exc) is ProviderErrorCode.SYNTAX_ERROR
