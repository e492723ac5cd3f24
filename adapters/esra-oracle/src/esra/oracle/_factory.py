"""The ``esra.providers`` entry point of esra-oracle: provider kind ``oracle``.

The source's ``connection_ref`` is its connection template
(``oracle://reader:${secret:env:HR_PASSWORD}@hr.internal:1521/HRPDB``); nothing connects until
the first search, which resolves secrets through the tenant's ``SecretStore`` and checks the
host against its outbound allowlist first.

The factory states which names Oracle cannot hold (``oracle_identifier_problem``: a ``"`` or
NUL, an empty name, one over 128 bytes), so a mapping naming one is refused when it is
published rather than by every search of the source.
"""

from __future__ import annotations

from esra.core.providers import (
    CheckedProviderFactory,
    OpenedProvider,
    ProviderRequest,
    option_value,
)
from esra.oracle._identifiers import oracle_identifier_problem
from esra.oracle._provider import OracleTextProvider

__all__ = ["OPTIONS", "open_oracle_provider"]

OPTIONS = frozenset({"pool_size", "max_rows", "current_schema", "connect_timeout_s"})


def _open_oracle_provider(request: ProviderRequest) -> OpenedProvider:
    """A pooled, read-only ``OracleTextProvider`` for the source (connections open on use).

    Raises:
        ProviderOptionError: an unknown or unusable option.
    """
    request.refuse_unknown_options(OPTIONS)
    schema = request.options.get("current_schema")
    provider = OracleTextProvider(
        tenant_id=request.tenant_id,
        connection=request.source.connection_ref,
        secrets=request.secrets,
        allowlist=request.allowlist,
        mappings=request.mappings,
        pool_size=option_value(request, "pool_size", int, 4),
        max_rows=option_value(request, "max_rows", int, 200),
        current_schema=None if schema is None else option_value(request, "current_schema", str, ""),
        connect_timeout_s=option_value(request, "connect_timeout_s", float, 10.0),
    )
    return OpenedProvider(provider, provider.close)


open_oracle_provider = CheckedProviderFactory(_open_oracle_provider, oracle_identifier_problem)
