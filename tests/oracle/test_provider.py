"""Tests for OracleTextProvider without a server: capabilities, connection path, refusals."""

from __future__ import annotations

import socket
from datetime import date
from typing import Any

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.config.mapping import FieldType, Operator
from esra.core.config.source import SourceHealth
from esra.core.exceptions import ProviderError, UnvalidatedQueryError
from esra.core.ports import SearchProvider, TextIndexKind
from esra.core.query import ResolvedFilter, Strategy
from esra.core.validation import ValidatedQuery
from esra.oracle import bind_params, current_schema_sql
from tests.oracle.conftest import TENANT, issue, provider, uncached_builder

_P = ProviderErrorCode


def test_is_a_search_provider_with_explicit_capabilities() -> None:
    """All six strategies, all seven operators, the Oracle Text index kind."""
    p = provider()
    assert isinstance(p, SearchProvider)
    assert p.capabilities.strategies == frozenset(Strategy)
    assert p.capabilities.operators == frozenset(Operator)
    assert p.capabilities.text_index is TextIndexKind.ORACLE_TEXT


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


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record any attempt to open a Python-level socket (the template path must open none)."""
    opened: list[Any] = []
    real = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        opened.append(address)
        real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return opened


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"allowed": ()}, _P.HOST_NOT_ALLOWED),
        ({"secrets": {}}, _P.SECRET_UNRESOLVED),
        ({"connection": "postgresql://u@127.0.0.1:1/db"}, _P.CONNECTION_TEMPLATE_INVALID),
        ({"connection": "oracle://u@${secret:h}:1/db"}, _P.CONNECTION_TEMPLATE_INVALID),
        ({"connection": "oracle://u@127.0.0.1:1/db?evil=1"}, _P.CONNECTION_TEMPLATE_INVALID),
        ({"connection": "oracle://u@127.0.0.1:1"}, _P.CONNECTION_TEMPLATE_INVALID),
    ],
)
async def test_template_failures_happen_before_any_socket(
    no_sockets: list[Any], kwargs: dict[str, Any], expected: ProviderErrorCode
) -> None:
    """Allowlist, secrets and template errors are raised with no connection attempted."""
    p = provider(**kwargs)
    with pytest.raises(ProviderError) as raised:
        await p.execute(issue(optional_terms=("solar",)), timeout_s=5)
    assert raised.value.code is expected
    assert no_sockets == []
    assert await p.health() is SourceHealth.UNAVAILABLE
    await p.close()


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


async def test_a_refused_connection_is_connection_refused() -> None:
    """A real oracledb connect to a closed port surfaces as CONNECTION_REFUSED, nothing else."""
    p = provider()
    try:
        with pytest.raises(ProviderError) as raised:
            await p.execute(issue(optional_terms=("solar",)), timeout_s=5)
        assert raised.value.code is _P.CONNECTION_REFUSED
        assert str(raised.value) == str(ProviderError(_P.CONNECTION_REFUSED))  # no driver text
        assert await p.health() is SourceHealth.UNAVAILABLE
    finally:
        await p.close()


async def test_refuses_unvalidated_queries() -> None:
    """A forged ValidatedQuery is refused before anything else happens."""
    p = provider()
    with pytest.raises(UnvalidatedQueryError):
        await p.execute(object.__new__(ValidatedQuery), timeout_s=5)
    await p.close()
