"""Document fetch: encrypted, caller-bound references to records already surfaced."""

from esra.core._fetch.refs import DEFAULT_REF_TTL_S, DocumentRefMinter
from esra.core._fetch.service import DEFAULT_FETCH_CHARS, DEFAULT_HOURLY_FETCH_CHARS
from esra.core._fetch.tokens import KEY_BYTES, DocumentLocator, Keyring, TokenBinding

__all__ = [
    "DEFAULT_FETCH_CHARS",
    "DEFAULT_HOURLY_FETCH_CHARS",
    "DEFAULT_REF_TTL_S",
    "KEY_BYTES",
    "DocumentLocator",
    "DocumentRefMinter",
    "Keyring",
    "TokenBinding",
]
