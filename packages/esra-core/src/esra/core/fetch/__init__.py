"""Document fetch: encrypted, caller-bound references to records already surfaced."""

from esra.core.fetch.refs import DEFAULT_REF_TTL_S, DocumentRefMinter
from esra.core.fetch.tokens import DocumentLocator, Keyring, TokenBinding

__all__ = [
    "DEFAULT_REF_TTL_S",
    "DocumentLocator",
    "DocumentRefMinter",
    "Keyring",
    "TokenBinding",
]
