"""Document references: encrypted, expiring, caller-bound tokens naming one record.

A reference identifies a record; it never authorizes anything — the fetch path re-runs the
whole authorization chain. It is encrypted rather than merely signed because a record key is
itself source-internal data that must not leak through an opaque-looking string.

Layout (URL-safe base64, no padding)::

    header = version (1 byte) ‖ key-id length (1 byte) ‖ key id (ASCII)
    token  = header ‖ nonce (12 random bytes) ‖ AES-256-GCM(plaintext) ‖ tag (16 bytes)

The plaintext holds the expiry and the locator (source id, mapping id, record key), padded
to a multiple of 32 bytes so the length says little about the key. The associated data binds
the header, the purpose (``fetch``), the tenant, the exposure id, the caller's subject and
issuer, and the client application: a token replayed by anyone else, through any other
client, anywhere else, fails authentication.

Version 1 tokens (minted before the client application was bound) still open, for the rest
of their lifetime, so that a rolling upgrade does not break the references a client holds;
only version 2 is minted.

:func:`open` raises :class:`DocumentNotFoundError` for every failure — tampering, truncation,
a foreign caller, tenant or exposure, expiry, an unknown or retired key — so a caller learns
nothing about why, and never that the record exists.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import struct
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta

import attrs
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from esra.core._context import InvocationContext
from esra.core.exceptions import DocumentNotFoundError
from esra.core.ports import Clock

__all__ = [
    "FETCH_PURPOSE",
    "KEY_BYTES",
    "TOKEN_VERSION",
    "DocumentLocator",
    "Keyring",
    "TokenBinding",
    "mint",
    "mint_all",
    "open",
]

TOKEN_VERSION = 2
# Minted before the client application was bound; its associated data has no such field.
_UNBOUND_APP_VERSION = 1
KEY_BYTES = 32
FETCH_PURPOSE = "fetch"
_NONCE_BYTES = 12
_TAG_BYTES = 16
_PAD_TO = 32
_MAX_FIELD = 0xFFFF
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_B64 = re.compile(r"[A-Za-z0-9_-]+")
_AAD_LABEL = b"esra.document-ref"
# A token far longer than any real one is refused before decoding.
_MAX_TOKEN_CHARS = 4 * (3 * _MAX_FIELD + 512) // 3


@attrs.frozen
class DocumentLocator:
    """Where a record lives: the payload a reference carries, never shown in the clear."""

    source_id: str
    mapping_id: str
    record_key: str = attrs.field(repr=False)


@attrs.frozen
class TokenBinding:
    """Who and where a reference is valid for; it is authenticated, not encrypted."""

    tenant_id: str
    exposure_id: str
    subject: str
    purpose: str = FETCH_PURPOSE
    # The subject's issuer: a subject names a caller only within its issuer (OpenID
    # Connect), so a reference minted for one issuer's "alice" never opens for another's.
    issuer: str = ""
    # The runtime is keyed to the tenant and the client application: a reference surfaced
    # to one AI client is not a handle another client of the same person can spend.
    client_app_id: str = ""

    @classmethod
    def for_caller(cls, ctx: InvocationContext, exposure_id: str) -> TokenBinding:
        """Bind to the invocation's tenant and caller, and to the exposure ``exposure_id``."""
        caller = ctx.caller
        return cls(
            tenant_id=ctx.tenant_id,
            exposure_id=exposure_id,
            subject=caller.subject,
            issuer=caller.issuer,
            client_app_id=ctx.client_app_id,
        )


def _check_key_id(key_id: str) -> str:
    if not _KEY_ID.fullmatch(key_id):
        msg = "a key id is 1-32 letters, digits, '_' or '-'"
        raise ValueError(msg)
    return key_id


class Keyring:
    """Decryption keys by id, and the one key new references are encrypted with.

    Immutable: :meth:`rotated` and :meth:`retired` return new keyrings. A reference sealed
    under a key stays openable while that key is in the ring and stops opening once it is
    retired. Key material never appears in ``repr``.
    """

    __slots__ = ("_ciphers", "_current")

    def __init__(self, keys: Mapping[str, bytes], *, current: str) -> None:
        if current not in keys:
            msg = "the current key id must name one of the keys"
            raise ValueError(msg)
        ciphers: dict[str, AESGCM] = {}
        for key_id, key in keys.items():
            if len(key) != KEY_BYTES:
                msg = f"a key is {KEY_BYTES} random bytes"
                raise ValueError(msg)
            ciphers[_check_key_id(key_id)] = AESGCM(bytes(key))
        self._ciphers = ciphers
        self._current = current

    @staticmethod
    def new_key() -> bytes:
        """Return fresh key material: 32 bytes from the operating system's CSPRNG."""
        return secrets.token_bytes(KEY_BYTES)

    @classmethod
    def generate(cls, key_id: str = "k1") -> Keyring:
        """Return a keyring with one fresh key (tests and demos; production loads its keys)."""
        return cls({key_id: cls.new_key()}, current=key_id)

    @classmethod
    def _of(cls, ciphers: dict[str, AESGCM], current: str) -> Keyring:
        ring = cls.__new__(cls)
        ring._ciphers = ciphers
        ring._current = current
        return ring

    @property
    def current_key_id(self) -> str:
        """The id of the key new references are encrypted with."""
        return self._current

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id references may be opened with, sorted."""
        return tuple(sorted(self._ciphers))

    def rotated(self, key_id: str, key: bytes | None = None) -> Keyring:
        """Add ``key`` (fresh if omitted) as ``key_id`` and encrypt with it from now on.

        The previous keys stay for decryption until :meth:`retired`.
        """
        if key_id in self._ciphers:
            msg = "a key id is never reused"
            raise ValueError(msg)
        material = self.new_key() if key is None else key
        if len(material) != KEY_BYTES:
            msg = f"a key is {KEY_BYTES} random bytes"
            raise ValueError(msg)
        ciphers = {**self._ciphers, _check_key_id(key_id): AESGCM(bytes(material))}
        return self._of(ciphers, key_id)

    def retired(self, key_ids: Iterable[str] | str) -> Keyring:
        """Remove keys: references sealed under them no longer open. The current key stays."""
        drop = {key_ids} if isinstance(key_ids, str) else set(key_ids)
        if self._current in drop:
            msg = "the current key cannot be retired; rotate first"
            raise ValueError(msg)
        return self._of({k: c for k, c in self._ciphers.items() if k not in drop}, self._current)

    def _cipher(self, key_id: str) -> AESGCM | None:
        return self._ciphers.get(key_id)

    def __repr__(self) -> str:
        return f"Keyring(current={self._current!r}, key_ids={self.key_ids!r})"


def _field(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > _MAX_FIELD:
        msg = "a reference field is at most 65535 bytes"
        raise ValueError(msg)
    return struct.pack(">H", len(data)) + data


def _header(key_id: str) -> bytes:
    kid = key_id.encode("ascii")
    return bytes((TOKEN_VERSION, len(kid))) + kid


def _associated_data(header: bytes, binding: TokenBinding) -> bytes:
    fields = [
        header,
        _field(_AAD_LABEL.decode()),
        _field(binding.purpose),
        _field(binding.tenant_id),
        _field(binding.exposure_id),
        _field(binding.subject),
        _field(binding.issuer),
    ]
    if header[0] != _UNBOUND_APP_VERSION:
        fields.append(_field(binding.client_app_id))
    return b"".join(fields)


def _epoch_ms(clock: Clock, plus_s: float = 0.0) -> int:
    moment = clock.now() + timedelta(seconds=plus_s)
    return int(moment.timestamp() * 1000)


def mint(
    locator: DocumentLocator,
    *,
    binding: TokenBinding,
    keyring: Keyring,
    clock: Clock,
    ttl_s: float,
) -> str:
    """Seal ``locator`` for ``binding`` under the keyring's current key, valid for ``ttl_s``."""
    (token,) = mint_all((locator,), binding=binding, keyring=keyring, clock=clock, ttl_s=ttl_s)
    return token


def mint_all(
    locators: Sequence[DocumentLocator],
    *,
    binding: TokenBinding,
    keyring: Keyring,
    clock: Clock,
    ttl_s: float,
) -> list[str]:
    """Seal each of ``locators`` for one ``binding``, as :func:`mint` seals one.

    What the tokens share is worked out once — the expiry (one reading of the clock), the
    header and the associated data — and their nonces come from one read of the operating
    system's CSPRNG, cut into 12-byte pieces: as unpredictable and as unlikely to repeat as
    12 bytes read apart, for a fraction of the cost of a read per token.
    """
    if not ttl_s > 0:
        msg = "a reference's lifetime must be positive"
        raise ValueError(msg)
    cipher = keyring._cipher(keyring.current_key_id)
    if cipher is None:  # pragma: no cover - the constructor guarantees it
        msg = "the keyring has no current key"
        raise ValueError(msg)
    expiry = struct.pack(">Q", _epoch_ms(clock, ttl_s))
    header = _header(keyring.current_key_id)
    associated = _associated_data(header, binding)
    nonces = secrets.token_bytes(_NONCE_BYTES * len(locators))
    tokens: list[str] = []
    for index, locator in enumerate(locators):
        plaintext = b"".join(
            (
                expiry,
                _field(locator.source_id),
                _field(locator.mapping_id),
                _field(locator.record_key),
            )
        )
        plaintext += bytes(-len(plaintext) % _PAD_TO)
        nonce = nonces[index * _NONCE_BYTES : (index + 1) * _NONCE_BYTES]
        sealed = cipher.encrypt(nonce, plaintext, associated)
        token = base64.urlsafe_b64encode(header + nonce + sealed).rstrip(b"=").decode("ascii")
        tokens.append(token)
    return tokens


def _decode(token: str) -> bytes | None:
    """Strict URL-safe base64: one canonical spelling per byte string, or ``None``."""
    if len(token) > _MAX_TOKEN_CHARS or not _B64.fullmatch(token) or len(token) % 4 == 1:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        return None
    # Unused low bits of the last character would give a second spelling of the same token.
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != token:
        return None
    return raw


def _read_field(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">H", data, at)
    start = at + 2
    end = start + length
    if end > len(data):
        raise ValueError
    return data[start:end].decode("utf-8"), end


def _locator(plaintext: bytes) -> tuple[int, DocumentLocator]:
    (expires_ms,) = struct.unpack_from(">Q", plaintext, 0)
    source_id, at = _read_field(plaintext, 8)
    mapping_id, at = _read_field(plaintext, at)
    record_key, at = _read_field(plaintext, at)
    if any(plaintext[at:]):
        raise ValueError
    return expires_ms, DocumentLocator(source_id, mapping_id, record_key)


def _open(token: str, binding: TokenBinding, keyring: Keyring, clock: Clock) -> DocumentLocator:
    raw = _decode(token) if isinstance(token, str) else None
    if raw is None or len(raw) < 2 or raw[0] not in (TOKEN_VERSION, _UNBOUND_APP_VERSION):
        raise DocumentNotFoundError
    body = 2 + raw[1]
    if len(raw) < body + _NONCE_BYTES + _TAG_BYTES:
        raise DocumentNotFoundError
    header = raw[:body]
    cipher = keyring._cipher(header[2:].decode("ascii", errors="replace"))
    if cipher is None:
        raise DocumentNotFoundError
    nonce = raw[body : body + _NONCE_BYTES]
    try:
        plaintext = cipher.decrypt(
            nonce, raw[body + _NONCE_BYTES :], _associated_data(header, binding)
        )
        expires_ms, locator = _locator(plaintext)
    except (InvalidTag, ValueError, struct.error, UnicodeDecodeError):
        raise DocumentNotFoundError from None
    if _epoch_ms(clock) >= expires_ms:
        raise DocumentNotFoundError
    return locator


def open(
    token: str,
    *,
    binding: TokenBinding,
    keyring: Keyring,
    clock: Clock,
) -> DocumentLocator:
    """Return the locator ``token`` carries, if it was minted for ``binding`` and is current.

    Raises:
        DocumentNotFoundError: for every failure, indistinguishably.
    """
    try:
        return _open(token, binding, keyring, clock)
    except DocumentNotFoundError:
        raise
    except Exception:
        # Whatever else a hostile token provokes is still only "not found".
        raise DocumentNotFoundError from None
