"""Envelope encryption of one secret value: a fresh data key per secret, wrapped by a KEK.

Per secret (:func:`seal`):

1. a random 256-bit data key (DEK) encrypts the value with AES-256-GCM under a random
   96-bit nonce; the plaintext is the value's UTF-8 length (4 bytes) and bytes, zero-padded
   to a multiple of 32 bytes, so a stored row says little about the secret's length;
2. the DEK is wrapped (AES-256-GCM, its own random nonce) by the keyring's active
   key-encryption key, whose id is stored beside it.

Both encryptions authenticate associated data binding the format version, the tenant and the
reference (and, for the wrapped DEK, the KEK id). A row copied to another tenant or another
reference, or relabelled with another KEK id, therefore fails authentication: the store
fails closed instead of handing tenant A's secret to tenant B.

Stored bytes (``SealedSecret``): ``wrapped_dek = nonce(12) ‖ ct(32) ‖ tag(16)`` and
``ciphertext = nonce(12) ‖ ct ‖ tag(16)``. Re-wrapping under a new KEK (:func:`rewrap`)
touches only ``wrapped_dek`` and ``kek_id``: the value's ciphertext is unchanged.
"""

from __future__ import annotations

import secrets
import struct

import attrs
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from esra.core._secrets.keys import KeyEncryptionKeys

__all__ = [
    "ENVELOPE_VERSION",
    "MAX_SECRET_BYTES",
    "EnvelopeOpenError",
    "SealedSecret",
    "rewrap",
    "seal",
    "unseal",
]

ENVELOPE_VERSION = 1
MAX_SECRET_BYTES = 64 * 1024
_DEK_BYTES = 32
_NONCE_BYTES = 12
_TAG_BYTES = 16
_PAD_TO = 32
_MAX_FIELD = 0xFFFF
_VALUE_LABEL = b"esra.secret.value"
_DEK_LABEL = b"esra.secret.dek"


class EnvelopeOpenError(Exception):
    """A sealed secret did not open: unknown KEK, wrong key, tampering, or a moved row.

    Deliberately carries no detail; :class:`EncryptedSecretStore` turns it into
    ``SECRET_UNRESOLVED`` and logs which of the cases it was.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@attrs.frozen
class SealedSecret:
    """One stored secret: who owns it, under which KEK, and opaque bytes.

    This is all a ``SecretTable`` ever stores. The bytes are ciphertext, but stay out of
    ``repr`` anyway so a logged row is one line.
    """

    tenant_id: str
    reference: str
    kek_id: str
    wrapped_dek: bytes = attrs.field(repr=False)
    ciphertext: bytes = attrs.field(repr=False)
    version: int = ENVELOPE_VERSION


def _field(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > _MAX_FIELD:
        msg = "a tenant id or secret reference is at most 65535 bytes"
        raise ValueError(msg)
    return struct.pack(">H", len(data)) + data


def _value_aad(version: int, tenant_id: str, reference: str) -> bytes:
    return b"".join((_VALUE_LABEL, bytes((version,)), _field(tenant_id), _field(reference)))


def _dek_aad(version: int, tenant_id: str, reference: str, kek_id: str) -> bytes:
    return b"".join(
        (_DEK_LABEL, bytes((version,)), _field(tenant_id), _field(reference), _field(kek_id))
    )


def _encrypt(cipher: AESGCM, plaintext: bytes, aad: bytes) -> bytes:
    nonce = secrets.token_bytes(_NONCE_BYTES)
    return nonce + cipher.encrypt(nonce, plaintext, aad)


def _decrypt(cipher: AESGCM, sealed: bytes, aad: bytes) -> bytes:
    if len(sealed) < _NONCE_BYTES + _TAG_BYTES:
        raise EnvelopeOpenError("truncated")
    try:
        return cipher.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], aad)
    except InvalidTag:
        raise EnvelopeOpenError("authentication failed") from None


def _wrap(dek: bytes, keys: KeyEncryptionKeys, tenant_id: str, reference: str) -> bytes:
    kek_id = keys.active_key_id
    kek = keys._cipher(kek_id)
    if kek is None:  # pragma: no cover - the keyring guarantees its active key
        raise EnvelopeOpenError("no active key")
    return _encrypt(kek, dek, _dek_aad(ENVELOPE_VERSION, tenant_id, reference, kek_id))


def _unwrap(sealed: SealedSecret, keys: KeyEncryptionKeys) -> bytes:
    if sealed.version != ENVELOPE_VERSION:
        raise EnvelopeOpenError("unknown envelope version")
    kek = keys._cipher(sealed.kek_id)
    if kek is None:
        raise EnvelopeOpenError("key-encryption key not in the keyring")
    aad = _dek_aad(sealed.version, sealed.tenant_id, sealed.reference, sealed.kek_id)
    dek = _decrypt(kek, sealed.wrapped_dek, aad)
    if len(dek) != _DEK_BYTES:
        raise EnvelopeOpenError("malformed data key")
    return dek


def seal(tenant_id: str, reference: str, value: str, keys: KeyEncryptionKeys) -> SealedSecret:
    """Encrypt ``value`` for ``(tenant_id, reference)`` under a fresh DEK and the active KEK.

    Raises:
        ValueError: if the value is longer than 64 KiB or a name longer than 65535 bytes.
    """
    data = value.encode("utf-8")
    if len(data) > MAX_SECRET_BYTES:
        msg = "a secret value is at most 64 KiB"
        raise ValueError(msg)
    plaintext = struct.pack(">I", len(data)) + data
    plaintext += bytes(-len(plaintext) % _PAD_TO)
    dek = secrets.token_bytes(_DEK_BYTES)
    ciphertext = _encrypt(
        AESGCM(dek), plaintext, _value_aad(ENVELOPE_VERSION, tenant_id, reference)
    )
    return SealedSecret(
        tenant_id=tenant_id,
        reference=reference,
        kek_id=keys.active_key_id,
        wrapped_dek=_wrap(dek, keys, tenant_id, reference),
        ciphertext=ciphertext,
    )


def unseal(sealed: SealedSecret, keys: KeyEncryptionKeys) -> str:
    """Return the value ``sealed`` holds, authenticated against its tenant and reference.

    Raises:
        EnvelopeOpenError: for an unknown KEK, a wrong key, tampering or a moved row.
    """
    dek = _unwrap(sealed, keys)
    plaintext = _decrypt(
        AESGCM(dek),
        sealed.ciphertext,
        _value_aad(sealed.version, sealed.tenant_id, sealed.reference),
    )
    if len(plaintext) < 4:
        raise EnvelopeOpenError("malformed plaintext")
    (length,) = struct.unpack_from(">I", plaintext, 0)
    body, padding = plaintext[4 : 4 + length], plaintext[4 + length :]
    if len(body) != length or any(padding):
        raise EnvelopeOpenError("malformed plaintext")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise EnvelopeOpenError("malformed plaintext") from None


def rewrap(sealed: SealedSecret, keys: KeyEncryptionKeys) -> SealedSecret:
    """Re-wrap ``sealed``'s data key under the active KEK; the value's ciphertext is kept.

    Raises:
        EnvelopeOpenError: if the current wrapping does not open with ``keys``.
    """
    dek = _unwrap(sealed, keys)
    return attrs.evolve(
        sealed,
        kek_id=keys.active_key_id,
        wrapped_dek=_wrap(dek, keys, sealed.tenant_id, sealed.reference),
    )
