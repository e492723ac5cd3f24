"""Minting a result's ``document_ref``: the keyring, clock, caller and lifetime for one response."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from esra.core._context import InvocationContext
from esra.core._encodable import has_lone_surrogate
from esra.core._fetch.tokens import DocumentLocator, Keyring, TokenBinding, mint, mint_all
from esra.core._pipeline.validation import MAX_RECORD_KEY_CHARS
from esra.core.ports import Clock

__all__ = ["DEFAULT_REF_TTL_S", "DocumentRefMinter", "fetchable"]

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
        """Seal ``locator`` for this caller on ``exposure_id``.

        A result cache re-mints only the locators of references :meth:`mint_all` gave.
        """
        return mint(
            locator,
            binding=self.binding(exposure_id),
            keyring=self.keyring,
            clock=self.clock,
            ttl_s=self.ttl_s,
        )

    def mint_all(self, exposure_id: str, locators: Sequence[DocumentLocator]) -> list[str | None]:
        """Seal each of ``locators`` for this caller on ``exposure_id`` (one response's);
        ``None`` in place of each a fetch could not read (:func:`fetchable`)."""
        readable = [locator for locator in locators if fetchable(locator)]
        sealed = iter(
            mint_all(
                readable,
                binding=self.binding(exposure_id),
                keyring=self.keyring,
                clock=self.clock,
                ttl_s=self.ttl_s,
            )
        )
        return [next(sealed) if fetchable(locator) else None for locator in locators]


def fetchable(locator: DocumentLocator) -> bool:
    """Whether a fetch would look ``locator``'s record up at all.

    A key longer than a lookup takes is "not found" on every fetch, so its reference would
    only mislead; and a key past what a reference can hold would make minting raise, failing
    the whole search that surfaced the record. So would a key holding a lone surrogate,
    which no reference can seal (and which providers bind as U+FFFD, so no lookup finds it).
    Such a result carries no reference.
    """
    key = locator.record_key
    return 0 < len(key) <= MAX_RECORD_KEY_CHARS and not has_lone_surrogate(key)
