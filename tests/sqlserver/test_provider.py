"""Tests for SqlServerProvider without a server: capabilities, connection path, refusals."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from esra.core.codes import ProviderErrorCode
from esra.core.config.mapping import Operator
from esra.core.config.source import SourceHealth
from esra.core.exceptions import ProviderError, UnvalidatedQueryError
from esra.core.ports import SearchProvider, TextIndexKind
from esra.core.query import Strategy
from esra.core.validation import ValidatedQuery
from esra.sqlserver import Isolation, session_sql
from tests.sqlserver.conftest import TENANT, issue, provider

_P = ProviderErrorCode


def test_is_a_search_provider_with_explicit_capabilities() -> None:
    """All six strategies, all seven operators, the SQL Server full-text index kind."""
    p = provider()
    assert isinstance(p, SearchProvider)
    assert p.capabilities.strategies == frozenset(Strategy)
    assert p.capabilities.operators == frozenset(Operator)
    assert p.capabilities.text_index is TextIndexKind.SQLSERVER_FULLTEXT


def test_session_batch_is_built_from_typed_configuration_only() -> None:
    """Lock timeout and isolation are an int and an enum; BEGIN TRANSACTION ends the batch."""
    assert session_sql(lock_timeout_ms=2500, isolation=Isolation.SNAPSHOT) == (
        "SET LOCK_TIMEOUT 2500; SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION"
    )
    with pytest.raises(ValueError, match="READ UNCOMMITTED"):
        session_sql(lock_timeout_ms=1, isolation="READ UNCOMMITTED")  # type: ignore[arg-type]


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
        ({"connection": "mssql://u@${secret:h}:1/db"}, _P.CONNECTION_TEMPLATE_INVALID),
        ({"connection": "mssql://u@127.0.0.1:1/db?evil=1"}, _P.CONNECTION_TEMPLATE_INVALID),
        ({"connection": "mssql://u@127.0.0.1:1"}, _P.CONNECTION_TEMPLATE_INVALID),
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


async def test_the_sqlserver_scheme_alias_and_default_port() -> None:
    """``sqlserver://`` is accepted and the port defaults to 1433 (checked by the allowlist)."""
    p = provider("sqlserver://u@db.internal/esra", allowed=((TENANT, "db.internal", 1433),))
    kwargs = await p.connection_kwargs()
    assert (kwargs["server"], kwargs["port"], kwargs["database"]) == ("db.internal", "1433", "esra")
    await p.close()


async def test_a_refused_connection_is_connection_refused() -> None:
    """A real pymssql connect to a closed port surfaces as CONNECTION_REFUSED, nothing else."""
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
