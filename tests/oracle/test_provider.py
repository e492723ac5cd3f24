"""Tests for OracleTextProvider without a server: capabilities, connection path, refusals."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from esra.core._config.mapping import FieldType, Operator
from esra.core._query import ResolvedFilter
from esra.core._record_predicate import PredicateAnd, PredicateComparison
from esra.core.ports import TextIndexKind
from esra.oracle import OracleTextProvider
from esra.oracle._provider import bind_params, current_schema_sql
from tests._sync_provider import SyncProviderChecks
from tests.oracle.conftest import TENANT, issue, provider, uncached_builder


def test_current_schema_is_always_a_quoted_identifier() -> None:
    """The configured schema is upper-cased per SQLAlchemy's convention and double-quoted."""
    assert current_schema_sql("hr") == 'ALTER SESSION SET CURRENT_SCHEMA = "HR"'
    assert current_schema_sql("Sales Ops") == 'ALTER SESSION SET CURRENT_SCHEMA = "Sales Ops"'
    for bad in ('a"; DROP TABLE x; --', "", "a\x00b", "x" * 129):
        with pytest.raises(ValueError, match="invalid schema"):
            current_schema_sql(bad)


def test_date_filters_bind_as_dates() -> None:
    """ISO date strings of DATE filters bind as datetime.date (no NLS_DATE_FORMAT reliance)."""
    query = issue(
        filters=(ResolvedFilter("art_published", FieldType.DATE, Operator.GTE, ("2022-06-01",)),)
    )
    built = uncached_builder().build(query)
    assert bind_params(built, query)["f0_0"] == date(2022, 6, 1)


def test_date_values_of_a_record_predicate_bind_as_dates() -> None:
    """A record-filter template's DATE values bind as datetime.date too; others unchanged."""
    predicate = PredicateAnd(
        (
            PredicateComparison("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),
            PredicateComparison("art_published", FieldType.DATE, Operator.GTE, ("2023-01-01",)),
        )
    )
    query = issue(record_predicate=predicate, lookup_key=None)
    params = bind_params(uncached_builder().build(query), query)
    assert (params["p0"], params["p1"]) == ("acme", date(2023, 1, 1))


async def test_the_default_port_and_service_name() -> None:
    """``oracle://`` defaults to port 1521 (checked by the allowlist); the path is the service."""
    p = provider("oracle://u@db.internal/HRPDB", allowed=((TENANT, "db.internal", 1521),))
    kwargs = await p.connection_kwargs()
    assert (kwargs["host"], kwargs["port"], kwargs["service_name"]) == (
        "db.internal",
        1521,
        "HRPDB",
    )
    await p.close()


class TestOracleTextProviderChecks(SyncProviderChecks):
    """The server-less checks every synchronous-driver provider passes."""

    scheme = "oracle"
    text_index = TextIndexKind.ORACLE_TEXT

    def provider(self, connection: str | None = None, **kwargs: Any) -> OracleTextProvider:
        """The conftest provider (by default over a closed local port)."""
        if connection is not None:
            kwargs["connection"] = connection
        return provider(**kwargs)
