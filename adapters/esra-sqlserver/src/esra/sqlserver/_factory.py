"""The ``esra.providers`` entry point of esra-sqlserver: provider kind ``sqlserver``.

The source's ``connection_ref`` is its connection template
(``mssql://reader:${secret:env:ERP_PASSWORD}@erp.internal:1433/erp``); nothing connects until
the first search, which resolves secrets through the tenant's ``SecretStore`` and checks the
host against its outbound allowlist first.

The factory states which names SQL Server cannot hold (``sqlserver_identifier_problem``: one
over 128 characters, the length of ``sysname``), so a mapping naming one is refused when it is
published rather than by every search of it.
"""

from __future__ import annotations

from esra.core.providers import (
    CheckedProviderFactory,
    OpenedProvider,
    ProviderOptionError,
    ProviderRequest,
    option_value,
    unencodable_identifier_problem,
)
from esra.sqlserver._provider import SqlServerProvider
from esra.sqlserver._session import Isolation

__all__ = [
    "MAX_IDENTIFIER_CHARS",
    "OPTIONS",
    "open_sqlserver_provider",
    "sqlserver_identifier_problem",
]

# An identifier is a sysname, nvarchar(128), regular or delimited.
MAX_IDENTIFIER_CHARS = 128

OPTIONS = frozenset({"pool_size", "max_rows", "isolation", "lock_timeout_ms", "login_timeout_s"})


def _isolation(request: ProviderRequest) -> Isolation:
    value = option_value(request, "isolation", str, Isolation.READ_COMMITTED.value)
    try:
        return Isolation(value)
    except ValueError:
        shown = ", ".join(repr(level.value) for level in Isolation)
        msg = f"source {request.source.id!r}: option 'isolation' must be one of {shown}"
        raise ProviderOptionError(msg) from None


def sqlserver_identifier_problem(name: str) -> str | None:
    """Why SQL Server cannot hold ``name`` as one identifier (without repeating it), or ``None``.

    Identifiers, delimited ones too, hold at most 128 characters (``sysname``); SQL Server
    counts UTF-16 code units, so a character outside the BMP counts twice. A name the
    statement's text cannot encode is refused first (its UTF-16 length has no meaning).
    """
    unencodable = unencodable_identifier_problem(name)
    if unencodable is not None:
        return unencodable
    if len(name.encode("utf-16-le")) // 2 > MAX_IDENTIFIER_CHARS:
        return f"it is longer than SQL Server's {MAX_IDENTIFIER_CHARS} characters"
    return None


def _open_sqlserver_provider(request: ProviderRequest) -> OpenedProvider:
    """A pooled, read-only ``SqlServerProvider`` for the source (connections open on use).

    Raises:
        ProviderOptionError: an unknown or unusable option.
    """
    request.refuse_unknown_options(OPTIONS)
    lock_timeout = request.options.get("lock_timeout_ms")
    provider = SqlServerProvider(
        tenant_id=request.tenant_id,
        connection=request.source.connection_ref,
        secrets=request.secrets,
        allowlist=request.allowlist,
        mappings=request.mappings,
        pool_size=option_value(request, "pool_size", int, 4),
        max_rows=option_value(request, "max_rows", int, 200),
        isolation=_isolation(request),
        lock_timeout_ms=None
        if lock_timeout is None
        else option_value(request, "lock_timeout_ms", int, 0),
        login_timeout_s=option_value(request, "login_timeout_s", int, 10),
    )
    return OpenedProvider(provider, provider.close)


open_sqlserver_provider = CheckedProviderFactory(
    _open_sqlserver_provider, sqlserver_identifier_problem
)
