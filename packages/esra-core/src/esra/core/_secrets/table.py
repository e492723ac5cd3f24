"""The ``SecretTable`` port: where sealed secrets are kept, as opaque bytes.

A table never sees a value or a key: it stores :class:`SealedSecret` rows keyed by
``(tenant_id, reference)``. Encryption, decryption and key handling are the
:class:`~esra.core._secrets.store.EncryptedSecretStore`'s, so an SQL adapter is a few
statements and cannot get the cryptography wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from esra.core._secrets.envelope import SealedSecret

__all__ = ["SecretTable"]


class SecretTable(Protocol):
    """**Protocol:** rows of sealed secrets by ``(tenant_id, reference)``."""

    async def put(self, row: SealedSecret) -> None:
        """Insert ``row``, or replace the row with the same tenant and reference."""
        ...

    async def get(self, tenant_id: str, reference: str) -> SealedSecret | None:
        """Return the row of ``tenant_id`` named ``reference``, or ``None``."""
        ...

    async def list_by_kek(
        self, kek_id: str, *, after: tuple[str, str] | None = None, limit: int = 100
    ) -> Sequence[SealedSecret]:
        """Rows wrapped by ``kek_id``, ordered by ``(tenant_id, reference)``, after ``after``.

        Every tenant's rows: this is the re-wrap scan, run by the operator, never by a
        tenant's request.
        """
        ...

    async def kek_usage(self) -> Mapping[str, int]:
        """How many rows each KEK id wraps (ids wrapping nothing are absent)."""
        ...

    async def replace_wrapping(self, row: SealedSecret, *, expected_wrapped_dek: bytes) -> bool:
        """Store ``row``'s ``kek_id`` and ``wrapped_dek`` if the row still has the old wrapping.

        A compare-and-set on ``expected_wrapped_dek`` (random per wrapping, so it names one
        row version): a secret rotated while a re-wrap ran is never overwritten with its
        old value's data key. Returns whether the row was updated.
        """
        ...
