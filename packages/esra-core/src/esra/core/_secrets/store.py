"""EncryptedSecretStore: the ``WritableSecretStore`` over a ``SecretTable``, with KEK rotation.

Rotation without downtime, in four steps (docs/secrets.md):

1. add the new KEK to every host's keyring, not active — every host can now unwrap it;
2. make it active (``use_keys``, or restart hosts one at a time) — new and rotated secrets
   are wrapped with it, and both keys still unwrap;
3. ``rewrap()`` until it reports nothing remaining — idempotent and resumable: it only
   touches rows still wrapped by a non-active key, and each row is a compare-and-set;
4. retire the old KEK (``retire``): refused while any row is still wrapped by it.

A row that does not open — its KEK is not in the ring, the key under that id is not the one
that wrapped it, the bytes were altered, or the row was copied to another tenant or
reference — resolves as ``SECRET_UNRESOLVED``; the log says which, never the value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from esra.core._secrets.envelope import EnvelopeOpenError, SealedSecret, rewrap, seal, unseal
from esra.core._secrets.keys import KeyEncryptionKeys, KeyringConfigurationError
from esra.core._secrets.table import SecretTable
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError

__all__ = ["EncryptedSecretStore", "KeyInUseError", "RewrapReport"]

_log = logging.getLogger(__name__)


class KeyInUseError(KeyringConfigurationError):
    """A key-encryption key cannot leave the keyring: stored secrets are still wrapped by it."""

    public_message = "The key-encryption key still wraps stored secrets; re-wrap them first."


@attrs.frozen
class RewrapReport:
    """What one ``rewrap()`` run did.

    ``rewrapped`` rows moved to the active KEK; ``skipped`` changed under the run (rotated
    concurrently — already on a current wrapping) or did not open (their KEK is missing or
    wrong: logged); ``remaining`` rows are still wrapped by a non-active KEK afterwards.
    """

    active_kek_id: str
    rewrapped: int
    skipped: int
    remaining: int

    @property
    def done(self) -> bool:
        """True once no row is wrapped by any KEK but the active one."""
        return self.remaining == 0


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        msg = f"a secret's {what} must be a non-empty string"
        raise ConfigurationError(msg)
    return value


class EncryptedSecretStore:
    """Secrets sealed with envelope encryption (``esra.core._secrets.envelope``) in a table.

    Args:
        table: where the sealed rows live (SQLite, PostgreSQL, or in memory for tests).
        keys: the key-encryption keyring (``KeyEncryptionKeys.from_file`` / ``from_env``).

    ``resolve`` never crosses tenants: the row is looked up by ``(tenant, reference)`` and
    authenticated against both. No method returns, logs or ``repr``s a value or key.
    """

    def __init__(self, table: SecretTable, keys: KeyEncryptionKeys) -> None:
        self._table = table
        self._keys = keys

    @property
    def keys(self) -> KeyEncryptionKeys:
        """The keyring in use (its ``repr`` lists key ids only)."""
        return self._keys

    def _sealed(self, tenant_id: str, reference: str, value: str) -> SealedSecret:
        _check_name("tenant id", tenant_id)
        _check_name("reference", reference)
        given: object = value  # callers outside the type checker pass anything
        if not isinstance(given, str):
            msg = "a secret value must be a string"
            raise ConfigurationError(msg)
        try:
            return seal(tenant_id, reference, value, self._keys)
        except UnicodeEncodeError:
            # Python's message names the character and its position in the value: the
            # refusal becomes an API error and an audit reason, which never describe a value.
            msg = "a secret's value, tenant id and reference must be text UTF-8 can encode"
            raise ConfigurationError(msg) from None
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None

    async def check_put(self, tenant_id: str, reference: str, value: str) -> None:
        """Raise what ``put`` would raise for this write; nothing is stored.

        The value is sealed and discarded: sealing is what refuses, so the check cannot
        drift from the write.
        """
        self._sealed(tenant_id, reference, value)

    async def put(self, tenant_id: str, reference: str, value: str) -> None:
        """Create, or replace (rotate), the secret ``reference`` of ``tenant_id``.

        Raises:
            ConfigurationError: on an empty tenant or reference, a non-string value or a
                value over 64 KiB.
        """
        row = self._sealed(tenant_id, reference, value)
        await self._table.put(row)
        _log.info(
            "secret written",
            extra={"tenant_id": tenant_id, "reference": reference, "kek_id": row.kek_id},
        )

    async def resolve(self, tenant_id: str, reference: str) -> str:
        """Return the secret, or raise ``ProviderError(SECRET_UNRESOLVED)``."""
        if not isinstance(tenant_id, str) or not isinstance(reference, str):
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED)
        row = await self._table.get(tenant_id, reference)
        if row is None or row.tenant_id != tenant_id or row.reference != reference:
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED)
        try:
            return unseal(row, self._keys)
        except EnvelopeOpenError as exc:
            _log.warning(
                "stored secret did not open: %s",
                exc.reason,
                extra={"tenant_id": tenant_id, "reference": reference, "kek_id": row.kek_id},
            )
            raise ProviderError(ProviderErrorCode.SECRET_UNRESOLVED) from None

    # -- key rotation ------------------------------------------------------------------------

    async def kek_usage(self) -> Mapping[str, int]:
        """How many stored secrets each KEK id wraps."""
        return dict(await self._table.kek_usage())

    async def missing_keks(self) -> tuple[str, ...]:
        """KEK ids that wrap stored secrets but are not in the keyring (check at start-up)."""
        usage = await self._table.kek_usage()
        return tuple(sorted(k for k, n in usage.items() if n and k not in self._keys))

    async def use_keys(self, keys: KeyEncryptionKeys) -> None:
        """Switch to ``keys`` live (e.g. a reloaded key file with a new active KEK).

        Raises:
            KeyInUseError: if ``keys`` lacks a KEK that still wraps a stored secret.
        """
        usage = await self._table.kek_usage()
        dropped = sorted(k for k, n in usage.items() if n and k in self._keys and k not in keys)
        if dropped:
            raise KeyInUseError(
                f"key-encryption key {dropped[0]!r} still wraps {usage[dropped[0]]} secret(s)"
            )
        self._keys = keys
        _log.info(
            "secret keyring replaced",
            extra={"active_kek_id": keys.active_key_id, "kek_ids": list(keys.key_ids)},
        )

    async def retire(self, kek_id: str) -> KeyEncryptionKeys:
        """Drop ``kek_id`` from the keyring in use and return the new keyring.

        Raises:
            KeyringConfigurationError: if ``kek_id`` is the active key.
            KeyInUseError: if a stored secret is still wrapped by it (run ``rewrap``).
        """
        await self.use_keys(self._keys.without(kek_id))
        return self._keys

    async def rewrap(self, *, batch_size: int = 100, limit: int | None = None) -> RewrapReport:
        """Re-wrap every data key still under a non-active KEK with the active one.

        Idempotent (a row already on the active KEK is never touched) and resumable (stop it
        any time, ``limit`` rows at most per run; the next run carries on). Safe beside live
        writes: each row is a compare-and-set on its old wrapping.
        """
        if batch_size < 1 or (limit is not None and limit < 0):
            msg = "the re-wrap batch size is positive and its limit non-negative"
            raise ConfigurationError(msg)
        keys = self._keys
        active = keys.active_key_id
        rewrapped = skipped = 0
        budget = limit
        for kek_id in sorted((await self._table.kek_usage()).keys() - {active}):
            after: tuple[str, str] | None = None
            while budget is None or budget > 0:
                size = batch_size if budget is None else min(batch_size, budget)
                rows = await self._table.list_by_kek(kek_id, after=after, limit=size)
                if not rows:
                    break
                for row in rows:
                    after = (row.tenant_id, row.reference)
                    if budget is not None:
                        budget -= 1
                    try:
                        fresh = rewrap(row, keys)
                    except EnvelopeOpenError as exc:
                        _log.warning(
                            "stored secret not re-wrapped: %s",
                            exc.reason,
                            extra={
                                "tenant_id": row.tenant_id,
                                "reference": row.reference,
                                "kek_id": row.kek_id,
                            },
                        )
                        skipped += 1
                        continue
                    if await self._table.replace_wrapping(
                        fresh, expected_wrapped_dek=row.wrapped_dek
                    ):
                        rewrapped += 1
                    else:
                        skipped += 1
        usage = await self._table.kek_usage()
        remaining = sum(n for k, n in usage.items() if k != active)
        _log.info(
            "secrets re-wrapped",
            extra={"active_kek_id": active, "rewrapped": rewrapped, "remaining": remaining},
        )
        return RewrapReport(
            active_kek_id=active, rewrapped=rewrapped, skipped=skipped, remaining=remaining
        )

    def __repr__(self) -> str:
        return f"EncryptedSecretStore(table={type(self._table).__name__}, keys={self._keys!r})"
