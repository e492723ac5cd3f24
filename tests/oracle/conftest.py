"""Shared helpers for the Oracle tests: issued queries, providers, rendered statements."""

from __future__ import annotations

from typing import Any

from esra.core.config.mapping import FieldType, Operator
from esra.core.query import ProjectedField, ResolvedFilter, Strategy
from esra.core.testing.contract import CONTRACT_MAPPING
from esra.core.testing.fakes import InMemorySecretStore, StaticHostAllowlist
from esra.core.validation import ValidatedQuery, _issue
from esra.oracle import OracleTextFullText, OracleTextProvider, oracle_dialect
from esra.sql import CompiledStatementCache, StatementBuilder

TENANT = "t-contract"


def issue(**overrides: Any) -> ValidatedQuery:
    """A query issued directly (bypassing the validator on purpose: the builder and the
    provider must be safe for a code path that forgets it). Benign values by default."""
    values: dict[str, Any] = {
        "query_id": "src-contract#1",
        "source_id": CONTRACT_MAPPING.source_id,
        "mapping": CONTRACT_MAPPING,
        "strategy": Strategy.KEYWORD,
        "required_terms": (),
        "optional_terms": (),
        "excluded_terms": (),
        "phrases": (),
        "filters": (),
        "record_filters": (ResolvedFilter("art_org", FieldType.TEXT, Operator.EQ, ("acme",)),),
        "projection": (ProjectedField("title", "art_title"), ProjectedField("body", "Art Body")),
        "freshness": ProjectedField("published", "art_published"),
        "row_limit": 50,
    }
    values.update(overrides)
    return _issue(**values)


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
