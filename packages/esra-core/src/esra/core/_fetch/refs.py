"""Minting a result's ``document_ref``: the keyring, clock, caller and lifetime for one response."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from esra.core._context import InvocationContext
from esra.core._fetch.tokens import DocumentLocator, Keyring, TokenBinding, mint, mint_all
from esra.core.ports import Clock

__all__ = ["DEFAULT_REF_TTL_S", "DocumentRefMinter"]

DEFAULT_REF_TTL_S = 900.0


@attrs.frozen
class DocumentRefMinter:
    """Mints references bound to this invocation's tenant and caller, valid for ``ttl_s``."""

    keyring: Keyring
    clock: Clock
    ctx: InvocationContext
    ttl_s: float = DEFAULT_REF_TTL_S

    def binding(self, exposure_id: str) -> TokenBinding:
        """The binding every reference minted for ``exposure_id`` carries."""
        return TokenBinding.for_caller(self.ctx, exposure_id)

    def mint(self, exposure_id: str, locator: DocumentLocator) -> str:
        """Seal ``locator`` for this caller on ``exposure_id``."""
        return mint(
            locator,
            binding=self.binding(exposure_id),
            keyring=self.keyring,
            clock=self.clock,
            ttl_s=self.ttl_s,
        )

    def mint_all(self, exposure_id: str, locators: Sequence[DocumentLocator]) -> list[str]:
        """Seal each of ``locators`` for this caller on ``exposure_id`` (one response's)."""
        return mint_all(
            locators,
            binding=self.binding(exposure_id),
            keyring=self.keyring,
            clock=self.clock,
            ttl_s=self.ttl_s,
        )
