"""RoutingSecretStore: one ``WritableSecretStore`` choosing the backing store by reference scheme.

``env:…`` and ``file:…`` references go to the external resolver (read-only: the value is
managed outside ESRA, so writing one is refused); every other reference is a secret ESRA
stores itself, in the encrypted table. This is the store a host hands to its providers and
to the admin chain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from esra.core._secrets.references import reference_scheme
from esra.core.exceptions import ConfigurationError
from esra.core.ports import SecretStore

if TYPE_CHECKING:
    # Only the Protocol's shape is needed; importing esra.core.admin would pull in the
    # whole admin chain wherever a host merely wants secret storage.
    from esra.core.ports import WritableSecretStore

__all__ = ["ExternalReferenceWriteError", "RoutingSecretStore"]


class ExternalReferenceWriteError(ConfigurationError):
    """A secret named ``env:…`` or ``file:…`` lives outside ESRA and cannot be written here."""

    public_message = "An env: or file: secret is managed outside ESRA and cannot be written."


def _refuse_external(reference: str) -> None:
    if isinstance(reference, str) and reference_scheme(reference) is not None:
        raise ExternalReferenceWriteError


class RoutingSecretStore:
    """Stored secrets in ``stored``; ``env:``/``file:`` references through ``external``."""

    def __init__(self, stored: WritableSecretStore, external: SecretStore) -> None:
        self._stored = stored
        self._external = external

    async def check_put(self, tenant_id: str, reference: str, value: str) -> None:
        """Raise what ``put`` would raise for this write; nothing is stored."""
        _refuse_external(reference)
        await self._stored.check_put(tenant_id, reference, value)

    async def put(self, tenant_id: str, reference: str, value: str) -> None:
        """Write a stored secret; refuse an external reference.

        Raises:
            ExternalReferenceWriteError: if ``reference`` is ``env:…`` or ``file:…``.
        """
        _refuse_external(reference)
        await self._stored.put(tenant_id, reference, value)

    async def resolve(self, tenant_id: str, reference: str) -> str:
        """Resolve through the store the reference's scheme names."""
        if isinstance(reference, str) and reference_scheme(reference) is not None:
            return await self._external.resolve(tenant_id, reference)
        return await self._stored.resolve(tenant_id, reference)

    def __repr__(self) -> str:
        return f"RoutingSecretStore(stored={self._stored!r}, external={self._external!r})"
