"""The ``esra.providers`` entry points of esra-mysql: provider kinds ``mysql`` and ``mariadb``.

One provider serves both servers. The source's ``connection_ref`` is its connection template
(``mysql://reader:${secret:env:CRM_PASSWORD}@crm.internal:3306/crm``); nothing connects until
the first search, which resolves secrets through the tenant's ``SecretStore`` and checks the
host against its outbound allowlist first.

The factory states which names MySQL and MariaDB cannot hold (``mysql_identifier_problem``),
so a mapping naming one is refused when it is published rather than by every search of it:
a NUL or a character outside the Basic Multilingual Plane (neither is permitted even in a
quoted identifier), a name over 64 characters (the limit of a database, table, column and
index name), and a name ending in a space (not permitted for database, table or column
names).
"""

from __future__ import annotations

from esra.core.providers import (
    CheckedProviderFactory,
    OpenedProvider,
    ProviderRequest,
    option_value,
    unencodable_identifier_problem,
)
from esra.mysql._provider import MySqlProvider

__all__ = ["MAX_IDENTIFIER_CHARS", "OPTIONS", "mysql_identifier_problem", "open_mysql_provider"]

# Database, table, column and index names (MySQL and MariaDB alike).
MAX_IDENTIFIER_CHARS = 64

OPTIONS = frozenset({"pool_size", "max_rows", "connect_timeout_s"})


def mysql_identifier_problem(name: str) -> str | None:
    """Why MySQL or MariaDB cannot hold ``name`` as one identifier (without repeating it), or
    ``None`` when it can.

    A quoted identifier holds any character of the Basic Multilingual Plane but NUL, at most
    64 of them, and a database, table or column name may not end in a space (and the
    statement's text must encode).
    """
    unencodable = unencodable_identifier_problem(name)
    if unencodable is not None:
        return unencodable
    if "\x00" in name:
        return "it holds a NUL, which no MySQL identifier can"
    if any(ord(character) > 0xFFFF for character in name):
        return "it holds a character outside the Basic Multilingual Plane"
    if len(name) > MAX_IDENTIFIER_CHARS:
        return f"it is longer than MySQL's {MAX_IDENTIFIER_CHARS} characters"
    if name.endswith(" "):
        return "it ends in a space"
    return None


def _open_mysql_provider(request: ProviderRequest) -> OpenedProvider:
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


open_mysql_provider = CheckedProviderFactory(_open_mysql_provider, mysql_identifier_problem)
