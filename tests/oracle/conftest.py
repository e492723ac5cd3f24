"""Shared helpers for the Oracle tests: issued queries, providers, rendered statements."""

from __future__ import annotations

from typing import Any

from esra.core.testing._fakes import InMemorySecretStore, StaticHostAllowlist
from esra.oracle import OracleTextFullText, OracleTextProvider
from esra.oracle._provider import oracle_dialect
from esra.sql import CompiledStatementCache, StatementBuilder
from tests._injection import issue

__all__ = ["TENANT", "issue", "provider", "uncached_builder"]

TENANT = "t-contract"


def uncached_builder() -> StatementBuilder:
    """A builder that compiles every time (so each assertion sees a fresh compilation)."""
    return StatementBuilder(oracle_dialect(), OracleTextFullText(), cache=CompiledStatementCache(0))


def provider(
    connection: str = "oracle://reader:${secret:pw}@127.0.0.1:1/ESRAPDB",
    *,
    allowed: tuple[tuple[str, str, int], ...] = ((TENANT, "127.0.0.1", 1),),
    secrets: dict[tuple[str, str], str] | None = None,
    **kwargs: Any,
) -> OracleTextProvider:
    """A provider over ``connection`` (by default a closed local port: nothing listens)."""
    return OracleTextProvider(
        tenant_id=TENANT,
        connection=connection,
        secrets=InMemorySecretStore(secrets if secrets is not None else {(TENANT, "pw"): "x"}),
        allowlist=StaticHostAllowlist(allowed),
        connect_timeout_s=2,
        **kwargs,
    )
