"""InMemorySecretTable: the ``SecretTable`` port in a dict, for tests and embedding."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import attrs

from esra.core._secrets.envelope import SealedSecret

__all__ = ["InMemorySecretTable"]


class InMemorySecretTable:
    """Sealed rows by ``(tenant_id, reference)``; behaves like the SQL tables."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], SealedSecret] = {}

    async def put(self, row: SealedSecret) -> None:
        """Insert or replace ``row``."""
        self._rows[(row.tenant_id, row.reference)] = row

    async def get(self, tenant_id: str, reference: str) -> SealedSecret | None:
        """The row of ``tenant_id`` named ``reference``, or ``None``."""
        return self._rows.get((tenant_id, reference))

    async def list_by_kek(
        self, kek_id: str, *, after: tuple[str, str] | None = None, limit: int = 100
    ) -> Sequence[SealedSecret]:
        """Rows wrapped by ``kek_id`` in key order, after ``after``, at most ``limit``."""
        keys = sorted(k for k, r in self._rows.items() if r.kek_id == kek_id)
        if after is not None:
            keys = [k for k in keys if k > after]
        return [self._rows[k] for k in keys[:limit]]

    async def kek_usage(self) -> Mapping[str, int]:
        """Rows per KEK id."""
        return dict(Counter(r.kek_id for r in self._rows.values()))

    async def replace_wrapping(self, row: SealedSecret, *, expected_wrapped_dek: bytes) -> bool:
        """Compare-and-set the row's wrapping on ``expected_wrapped_dek``."""
        key = (row.tenant_id, row.reference)
        current = self._rows.get(key)
        if current is None or current.wrapped_dek != expected_wrapped_dek:
            return False
        self._rows[key] = attrs.evolve(current, kek_id=row.kek_id, wrapped_dek=row.wrapped_dek)
        return True

    def __repr__(self) -> str:
        return f"InMemorySecretTable(rows={len(self._rows)})"
