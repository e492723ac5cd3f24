"""Tests for SqlServerProvider without a server: capabilities, connection path, refusals."""

from __future__ import annotations

from typing import Any

import pytest

from esra.core.ports import TextIndexKind
from esra.sqlserver import Isolation, SqlServerProvider
from esra.sqlserver._session import session_sql
from tests._sync_provider import SyncProviderChecks
from tests.sqlserver.conftest import TENANT, provider


def test_session_batch_is_built_from_typed_configuration_only() -> None:
    """Lock timeout and isolation are an int and an enum; BEGIN TRANSACTION ends the batch."""
    assert session_sql(lock_timeout_ms=2500, isolation=Isolation.SNAPSHOT) == (
        "SET LOCK_TIMEOUT 2500; SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION"
    )
    with pytest.raises(ValueError, match="READ UNCOMMITTED"):
        session_sql(lock_timeout_ms=1, isolation="READ UNCOMMITTED")  # type: ignore[arg-type]


async def test_the_sqlserver_scheme_alias_and_default_port() -> None:
    """``sqlserver://`` is accepted and the port defaults to 1433 (checked by the allowlist)."""
    p = provider("sqlserver://u@db.internal/esra", allowed=((TENANT, "db.internal", 1433),))
    kwargs = await p.connection_kwargs()
    assert (kwargs["server"], kwargs["port"], kwargs["database"]) == ("db.internal", "1433", "esra")
    await p.close()


class TestSqlServerProviderChecks(SyncProviderChecks):
    """The server-less checks every synchronous-driver provider passes."""

    scheme = "mssql"
    text_index = TextIndexKind.SQLSERVER_FULLTEXT

    def provider(self, connection: str | None = None, **kwargs: Any) -> SqlServerProvider:
        """The conftest provider (by default over a closed local port)."""
        if connection is not None:
            kwargs["connection"] = connection
        return provider(**kwargs)
