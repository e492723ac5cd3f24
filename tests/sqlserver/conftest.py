"""Shared helpers for the SQL Server tests: issued queries, providers, rendered statements."""

from __future__ import annotations

from typing import Any

from esra.core.testing._fakes import InMemorySecretStore, StaticHostAllowlist
from esra.sql import CompiledStatementCache, StatementBuilder
from esra.sqlserver import SqlServerFullText, SqlServerProvider
from esra.sqlserver._provider import sqlserver_dialect
from tests._injection import issue

__all__ = ["TENANT", "issue", "provider", "uncached_builder"]

TENANT = "t-contract"


def uncached_builder() -> StatementBuilder:
    """A builder that compiles every time (so each assertion sees a fresh compilation)."""
    return StatementBuilder(
        sqlserver_dialect(), SqlServerFullText(), cache=CompiledStatementCache(0)
    )


def provider(
    connection: str = "mssql://reader:${secret:pw}@127.0.0.1:1/esra",
    *,
    allowed: tuple[tuple[str, str, int], ...] = ((TENANT, "127.0.0.1", 1),),
    secrets: dict[tuple[str, str], str] | None = None,
    **kwargs: Any,
) -> SqlServerProvider:
    """A provider over ``connection`` (by default a closed local port: nothing listens)."""
    return SqlServerProvider(
        tenant_id=TENANT,
        connection=connection,
        secrets=InMemorySecretStore(secrets if secrets is not None else {(TENANT, "pw"): "x"}),
        allowlist=StaticHostAllowlist(allowed),
        login_timeout_s=2,
        **kwargs,
    )
