"""Key-encryption keys (KEKs): the keyring that wraps every secret's data key.

A keyring is a set of 256-bit AES keys, each under a key id, exactly one of them *active*
(new data keys are wrapped with it); the others only unwrap, until they are retired.

The keyring is configuration, read from a file or from one environment variable, never from
the database it protects. Its text is JSON::

    {"active": "k2", "keys": {"k1": "<base64 of 32 random bytes>", "k2": "<...>"}}

- a key id is 1-32 letters, digits, ``_`` or ``-``, and is never reused for other material;
- a key is standard or URL-safe base64 (padding optional) of exactly 32 bytes; anything
  shorter or longer, a key with fewer than 16 distinct byte values (zeros, a repeated
  pattern, a typed passphrase would not pass either), and the same material under two ids
  are refused;
- a key file must be a regular file that neither group nor others may read or write
  (``chmod 600``), like an SSH private key: it is the root of every stored secret.

Every refusal is a :class:`KeyringConfigurationError` (``ESRA_CONFIGURATION_INVALID``) whose
message names the rule broken and never the key material. Generate a key with
``python -c "import base64, secrets; print(base64.b64encode(secrets.token_bytes(32)).decode())"``.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from esra.core.exceptions import ConfigurationError

__all__ = [
    "KEK_BYTES",
    "KeyEncryptionKeys",
    "KeyringConfigurationError",
    "check_key_id",
]

KEK_BYTES = 32
# A CSPRNG key of 32 bytes has ~31 distinct byte values; fewer than 16 happens with
# probability far below 2**-100, so such a key was not drawn at random.
_MIN_DISTINCT_BYTES = 16
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_B64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
# A keyring document far larger than any real one is refused before parsing.
_MAX_KEYRING_CHARS = 64 * 1024


class KeyringConfigurationError(ConfigurationError):
    """The key-encryption keyring is missing, malformed, weak or unsafe to read."""

    public_message = "The secret key configuration is invalid."


def check_key_id(key_id: object) -> str:
    """Return ``key_id`` if it is 1-32 letters, digits, '_' or '-'.

    Raises:
        KeyringConfigurationError: otherwise.
    """
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        msg = "a key id is 1-32 letters, digits, '_' or '-'"
        raise KeyringConfigurationError(msg)
    return key_id


def _check_material(material: object) -> bytes:
    if not isinstance(material, bytes | bytearray) or len(material) != KEK_BYTES:
        msg = f"a key-encryption key is exactly {KEK_BYTES} random bytes"
        raise KeyringConfigurationError(msg)
    if len(set(material)) < _MIN_DISTINCT_BYTES:
        msg = "a key-encryption key is not random (too few distinct bytes)"
        raise KeyringConfigurationError(msg)
    return bytes(material)


def _decode_key(text: object) -> bytes:
    if not isinstance(text, str) or not _B64.fullmatch(text.strip()):
        msg = "a key-encryption key is written as base64"
        raise KeyringConfigurationError(msg)
    raw = text.strip().rstrip("=").replace("-", "+").replace("_", "/")
    try:
        material = base64.b64decode(raw + "=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        msg = "a key-encryption key is written as base64"
        raise KeyringConfigurationError(msg) from None
    return _check_material(material)


class KeyEncryptionKeys:
    """Key-encryption keys by id, and the active one new data keys are wrapped with.

    Immutable: :meth:`with_key`, :meth:`activated` and :meth:`without` return new keyrings.
    Key material never appears in ``repr``/``str``, and there is no accessor for it: the
    ring only wraps and unwraps data keys (:mod:`esra.core._secrets.envelope`).

    Raises:
        KeyringConfigurationError: on a bad key id, weak or short material, material
            repeated under two ids, or an active id naming no key.
    """

    __slots__ = ("_active", "_ciphers", "_fingerprints")

    def __init__(self, keys: Mapping[str, bytes], *, active: str) -> None:
        ciphers: dict[str, AESGCM] = {}
        fingerprints: set[bytes] = set()
        for key_id, material in keys.items():
            checked = _check_material(material)
            if checked in fingerprints:
                msg = "the same key-encryption key is listed under two ids"
                raise KeyringConfigurationError(msg)
            fingerprints.add(checked)
            ciphers[check_key_id(key_id)] = AESGCM(checked)
        if active not in ciphers:
            msg = "the active key id must name one of the keys"
            raise KeyringConfigurationError(msg)
        self._ciphers = ciphers
        self._active = active
        # Only to refuse one material under two ids; never exposed.
        self._fingerprints = frozenset(fingerprints)

    # -- construction ------------------------------------------------------------------------

    @staticmethod
    def new_key() -> bytes:
        """Return fresh key material: 32 bytes from the operating system's CSPRNG."""
        return secrets.token_bytes(KEK_BYTES)

    @classmethod
    def generate(cls, key_id: str = "k1") -> KeyEncryptionKeys:
        """A keyring with one fresh key (tests and demos; production loads its keyring)."""
        return cls({key_id: cls.new_key()}, active=key_id)

    @classmethod
    def parse(cls, text: str) -> KeyEncryptionKeys:
        """Parse the JSON keyring document (see the module docstring).

        Raises:
            KeyringConfigurationError: for any malformed, weak or inconsistent keyring.
        """
        if not isinstance(text, str) or len(text) > _MAX_KEYRING_CHARS:
            msg = "the keyring is a JSON document of at most 64 KiB"
            raise KeyringConfigurationError(msg)
        try:
            document = json.loads(text)
        except ValueError:
            # The decoder's message may quote the document, i.e. key material: drop it.
            msg = "the keyring is not valid JSON"
            raise KeyringConfigurationError(msg) from None
        if not isinstance(document, dict) or set(document) != {"active", "keys"}:
            msg = 'the keyring is {"active": "<key id>", "keys": {"<key id>": "<base64>"}}'
            raise KeyringConfigurationError(msg)
        keys = document["keys"]
        if not isinstance(keys, dict) or not keys:
            msg = "the keyring lists at least one key"
            raise KeyringConfigurationError(msg)
        active = check_key_id(document["active"])
        return cls({check_key_id(k): _decode_key(v) for k, v in keys.items()}, active=active)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> KeyEncryptionKeys:
        """Load the keyring from ``path``: a regular file readable by its owner only.

        Raises:
            KeyringConfigurationError: if the file is missing, not a regular file, open to
                group or others, or holds a bad keyring.
        """
        try:
            fd = os.open(Path(path), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            msg = "the keyring file cannot be opened (missing, a symlink, or unreadable)"
            raise KeyringConfigurationError(msg) from None
        try:
            # Checked on the open descriptor: what is read is what was checked.
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                msg = "the keyring file is not a regular file"
                raise KeyringConfigurationError(msg)
            if info.st_mode & 0o077:
                msg = "the keyring file must not be accessible to group or others (chmod 600)"
                raise KeyringConfigurationError(msg)
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(_MAX_KEYRING_CHARS + 1)
        finally:
            os.close(fd)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            msg = "the keyring file is not UTF-8 text"
            raise KeyringConfigurationError(msg) from None
        return cls.parse(text)

    @classmethod
    def from_env(cls, variable: str, environ: Mapping[str, str] | None = None) -> KeyEncryptionKeys:
        """Load the keyring from the environment variable ``variable``.

        Raises:
            KeyringConfigurationError: if the variable is unset, empty or a bad keyring.
        """
        text = (os.environ if environ is None else environ).get(variable, "")
        if not text.strip():
            msg = "the keyring environment variable is unset or empty"
            raise KeyringConfigurationError(msg)
        return cls.parse(text)

    # -- rotation ----------------------------------------------------------------------------

    def with_key(self, key_id: str, material: bytes | None = None) -> KeyEncryptionKeys:
        """Add ``material`` (fresh if omitted) as ``key_id``, not yet active.

        Raises:
            KeyringConfigurationError: if ``key_id`` is taken or the material is weak.
        """
        if key_id in self._ciphers:
            msg = "a key id is never reused"
            raise KeyringConfigurationError(msg)
        checked = _check_material(self.new_key() if material is None else material)
        if checked in self._fingerprints:
            msg = "the same key-encryption key is listed under two ids"
            raise KeyringConfigurationError(msg)
        ring = self._copy()
        ring._ciphers = {**self._ciphers, check_key_id(key_id): AESGCM(checked)}
        ring._fingerprints = self._fingerprints | {checked}
        return ring

    def activated(self, key_id: str) -> KeyEncryptionKeys:
        """Wrap new data keys with ``key_id`` from now on (every key still unwraps).

        Raises:
            KeyringConfigurationError: if ``key_id`` is not in the ring.
        """
        if key_id not in self._ciphers:
            msg = "the active key id must name one of the keys"
            raise KeyringConfigurationError(msg)
        ring = self._copy()
        ring._active = key_id
        return ring

    def without(self, key_id: str) -> KeyEncryptionKeys:
        """Drop ``key_id``: what it wrapped no longer unwraps. The active key cannot go.

        This checks only the ring; ``EncryptedSecretStore.retire`` also refuses a key that
        still wraps a stored secret.

        Raises:
            KeyringConfigurationError: if ``key_id`` is the active key.
        """
        if key_id == self._active:
            msg = "the active key cannot be retired; activate another key first"
            raise KeyringConfigurationError(msg)
        ring = self._copy()
        ring._ciphers = {k: c for k, c in self._ciphers.items() if k != key_id}
        return ring

    def _copy(self) -> KeyEncryptionKeys:
        ring = KeyEncryptionKeys.__new__(KeyEncryptionKeys)
        ring._ciphers = dict(self._ciphers)
        ring._active = self._active
        ring._fingerprints = self._fingerprints
        return ring

    # -- use ---------------------------------------------------------------------------------

    @property
    def active_key_id(self) -> str:
        """The id of the key new data keys are wrapped with."""
        return self._active

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id that unwraps, sorted."""
        return tuple(sorted(self._ciphers))

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._ciphers

    def _cipher(self, key_id: str) -> AESGCM | None:
        return self._ciphers.get(key_id)

    def __repr__(self) -> str:
        return f"KeyEncryptionKeys(active={self._active!r}, key_ids={self.key_ids!r})"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        # Pickling would copy key material into whatever stores the pickle.
        msg = "a keyring is not serialisable"
        raise TypeError(msg)
