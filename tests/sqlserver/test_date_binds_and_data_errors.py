"""DATE values travel as ``date`` RPC parameters; value conversion errors are the query's fault.

No SQL Server runs here. What is checked is what the provider sends (over the recording
``_mssql`` stand-in) and how it classifies the server's error numbers.

A DATE field's value is the validator's ISO text (``2024-01-05``). Declared ``nvarchar``, it
was converted to a ``datetime``/``smalldatetime`` column's type under the session's
``DATEFORMAT`` (set by the login's language), which reads ``yyyy-mm-dd`` as ``yyyy-dd-mm``
under ``dmy`` (British, German, French...): ``2024-01-05`` meant 1 May, silently, in filters
and record-level predicates alike, and ``2024-01-13`` failed (error 242). Declared ``date``,
the same text converts independently of ``DATEFORMAT`` (documented for ``date``; ``ydm`` is
not supported for it).
"""

from __future__ import annotations

import pymssql
import pytest

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ResolvedFilter
from esra.core._record_predicate import PredicateAnd, PredicateComparison
from esra.core.codes import ProviderErrorCode
from esra.core.providers import ValidatedQuery
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.sqlserver import SqlServerProvider
from esra.sqlserver._errors import classify
from esra.sqlserver._rendering import SqlServerTextRendering
from esra.sqlserver._rpc import rpc_statement
from esra.sqlserver._values import rpc_values
from tests.sqlserver._fake_mssql import FakeConnection, FakeMssql
from tests.sqlserver.conftest import issue, provider, uncached_builder

_GENERAL = (
    b"DB-Lib error message 20018, severity 16:\n"
    b"General SQL Server error: Check messages from the SQL Server\n"
)


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> FakeMssql:
    """Every connection the provider opens is the recording stand-in."""
    mssql = FakeMssql()
    monkeypatch.setattr(pymssql, "connect", lambda **_: FakeConnection(mssql))
    return mssql


def _dated_query() -> ValidatedQuery:
    predicate = PredicateAnd(
        (
            PredicateComparison("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),
            PredicateComparison("art_published", FieldType.DATE, Operator.LTE, ("2024-01-13",)),
        )
    )
    return issue(
        required_terms=("solar",),
        filters=(
            ResolvedFilter("art_published", FieldType.DATE, Operator.GTE, ("2024-01-05",)),
            ResolvedFilter("art_category", FieldType.TEXT, Operator.EQ, ("2024-01-05",)),
        ),
        record_filters=(
            ResolvedFilter("art_published", FieldType.DATE, Operator.IN, ("2023-02-01",)),
        ),
        record_predicate=predicate,
    )


async def test_date_values_are_declared_date_not_nvarchar(fake_server: FakeMssql) -> None:
    """Filter, record-filter and predicate DATE values are ``date`` parameters; a TEXT value
    that looks like a date stays ``nvarchar``."""
    p: SqlServerProvider = provider()
    await p.execute(_dated_query(), timeout_s=3.0)
    await p.close()
    (proc,) = fake_server.procedures
    binds = {b.name: b.value for b in proc.binds}
    declared = dict(part.split(" ", 1) for part in str(binds["@params"]).split(", "))
    assert declared["@f0_0"] == "date"
    assert declared["@r0_0"] == "date"
    assert declared["@p1"] == "date"
    assert declared["@f1_0"] == "nvarchar(4000)"
    assert declared["@p0"] == "nvarchar(4000)"
    # The text sent is the ISO date, which the server converts to the declared type.
    assert (binds["@f0_0"], binds["@r0_0"], binds["@p1"]) == (
        "2024-01-05",
        "2023-02-01",
        "2024-01-13",
    )


def test_the_validators_measure_declares_dates_as_execution_does() -> None:
    """The stated-limit measure composes the very definition execution sends."""
    query = _dated_query()
    rendering = SqlServerTextRendering(uncached_builder())
    lengths = rendering.rendered_lengths(query)
    assert lengths is not None
    built = uncached_builder().build(query)
    sent = rpc_statement(built.sql, rpc_values(built, query))
    assert lengths.command == max(len(sent.text), len(sent.definition))
    assert "@f0_0 date" in sent.definition


@pytest.mark.parametrize(
    "number",
    [
        241,  # conversion failed when converting date and/or time from character string
        242,  # conversion of a varchar to datetime resulted in an out-of-range value
        245,  # conversion failed when converting the nvarchar value ... to data type int
        8114,  # error converting data type nvarchar to numeric
        8115,  # arithmetic overflow error converting expression to data type
        220,  # arithmetic overflow error for data type
    ],
)
def test_a_value_the_column_cannot_take_is_the_querys_fault(number: int) -> None:
    """A filter value the column's type cannot hold fails the same on every attempt: as
    UNKNOWN it counted against the breaker, so a caller's values could take the source
    away from every caller of the tenant (PostgreSQL: class 22 is SYNTAX_ERROR)."""
    exc = pymssql.OperationalError((number, b"Conversion failed 'secret value'." + _GENERAL))
    assert classify(exc) is ProviderErrorCode.SYNTAX_ERROR


def test_mapping_is_the_contract_one() -> None:
    """The fields used above are the contract mapping's own."""
    assert CONTRACT_MAPPING.field("published") is not None
