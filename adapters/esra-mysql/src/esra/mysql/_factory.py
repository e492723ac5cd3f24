"""The ``esra.providers`` entry points of esra-mysql: provider kinds ``mysql`` and ``mariadb``.

One provider serves both servers. The source's ``connection_ref`` is its connection template
(``mysql://reader:${secret:env:CRM_PASSWORD}@crm.internal:3306/crm``); nothing connects until
the first search, which resolves secrets through the tenant's ``SecretStore`` and checks the
host against its outbound allowlist first.
"""

from __future__ import annotations

from esra.core.providers import OpenedProvider, ProviderRequest, option_value
from esra.mysql._provider import MySqlProvider

__all__ = ["OPTIONS", "open_mysql_provider"]

OPTIONS = frozenset({"pool_size", "max_rows", "connect_timeout_s"})


def open_mysql_provider(request: ProviderRequest) -> OpenedProvider:
    """A pooled, read-only ``MySqlProvider`` for the source (connections open on first use).

    Raises:
        ProviderOptionError: an unknown or unusable option.
    """
    request.refuse_unknown_options(OPTIONS)
    provider = MySqlProvider(
        tenant_id=request.tenant_id,
        connection=request.source.connection_ref,
        secrets=request.secrets,
        allowlist=request.allowlist,
        mappings=request.mappings,
        pool_size=option_value(request, "pool_size", int, 4),
        max_rows=option_value(request, "max_rows", int, 200),
        connect_timeout_s=option_value(request, "connect_timeout_s", float, 10.0),
    )
    return OpenedProvider(provider, provider.close)
