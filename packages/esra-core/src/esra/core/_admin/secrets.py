"""Writable secret storage: where ``SECURITY_MANAGE`` puts connection secrets.

Configuration only ever holds the reference; the value lives here, keyed by tenant.
"""

from __future__ import annotations

from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.ports import WritableSecretStore

# WritableSecretStore is a port (esra.core.ports); it stays importable from here, where the
# admin services first defined it.
__all__ = ["InMemorySecretVault", "WritableSecretStore"]


class InMemorySecretVault:
    """Secrets in a dict keyed by (tenant, reference); for tests and embedding."""

    def __init__(self) -> None:
        self._secrets: dict[tuple[str, str], str] = {}

    async def check_put(self, tenant_id: str, reference: str, value: str) -> None:
        """Accept every write: a dict holds any value under any reference."""

    async def put(self, tenant_id: str, reference: str, value: str) -> None:
        """Store ``value`` under ``reference`` for ``tenant_id`` only."""
        self._secrets[(tenant_id, reference)] = value

    async def resolve(self, tenant_id: str, reference: str) -> str:
        """Return the secret or raise ``ProviderError(SECRET_UNRESOLVED)``."""
        try:
            return self._secrets[(tenant_id, reference)]
        except KeyError:
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED) from None
