"""The reusable ``SecretTable`` contract suite: an ``EncryptedSecretStore`` over each table.

An adapter's test module subclasses ``SecretTableContract`` and implements ``make_table``,
which returns a fresh, empty table (or an awaitable of one), and, when it opened anything,
``close_table``::

    class TestMySecretTable(SecretTableContract):
        def make_table(self, tmp_path):
            return MySecretTable(tmp_path / "secrets.db")

Each test may open more than one table; each gets its own empty directory. The suite goes
through the store (sealing, opening, re-wrap) and through the table directly (moving or
altering rows as an attacker with database access would). Requires ``pytest`` and
``pytest-asyncio``.
"""

from __future__ import annotations

import base64
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from esra.core._secrets.envelope import SealedSecret
from esra.core._secrets.keys import KeyEncryptionKeys, KeyringConfigurationError
from esra.core._secrets.store import EncryptedSecretStore, KeyInUseError
from esra.core._secrets.table import SecretTable
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError

__all__ = ["SecretTableContract", "TableOpener", "plaintext_forms"]

TENANT = "tenant-a"
OTHER = "tenant-b"
REFERENCE = "sales-db"
PLAINTEXT = "contract-secret-Zq7!pass word"
ROTATED = "contract-rotated-Vx2#pass word"

TableOpener = Callable[[], Awaitable[SecretTable]]


def plaintext_forms(value: str | bytes) -> list[bytes]:
    """Byte strings that would betray ``value``: raw, UTF-16, hex, and base64 at any offset.

    Base64 of a value embedded in a longer string depends on its offset modulo 3, so each
    of the three alignments is encoded and its first and last (context-dependent) characters
    trimmed.
    """
    raw = value.encode("utf-8") if isinstance(value, str) else value
    forms = [raw, raw.hex().encode(), raw.hex().upper().encode()]
    if isinstance(value, str):
        forms.append(value.encode("utf-16-le"))
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\x00" * shift + raw).rstrip(b"=")
            skip = (shift * 4 + 2) // 3  # characters touching the padding prefix
            core = encoded[skip:-2] if len(encoded) > skip + 2 else b""
            if len(core) >= 8:
                forms.append(core)
    return forms


def _unresolved(exc: pytest.ExceptionInfo[ProviderError]) -> None:
    assert exc.value.code is ProviderErrorCode.SECRET_UNRESOLVED


@pytest.mark.asyncio
class SecretTableContract:
    """Tests every ``SecretTable`` must pass under the store; subclass, implement ``make_table``."""

    def make_table(self, tmp_path: Path) -> SecretTable | Awaitable[SecretTable]:
        """Return a fresh, empty table living under ``tmp_path`` (an empty directory)."""
        raise NotImplementedError

    def close_table(self, table: SecretTable) -> Awaitable[None] | None:
        """Release what ``make_table`` opened; by default calls the table's ``close()``."""
        close = getattr(table, "close", None)
        result: Awaitable[None] | None = close() if callable(close) else None
        return result

    @pytest.fixture
    async def open_table(self, tmp_path: Path) -> AsyncIterator[TableOpener]:
        """A function opening fresh tables; all are closed after the test."""
        opened: list[SecretTable] = []

        async def opener() -> SecretTable:
            directory = tmp_path / f"table-{len(opened)}"
            directory.mkdir()
            made = self.make_table(directory)
            table = await made if inspect.isawaitable(made) else made
            opened.append(table)
            return table

        yield opener
        for table in opened:
            result = self.close_table(table)
            if inspect.isawaitable(result):
                await result

    @pytest.fixture
    async def table(self, open_table: TableOpener) -> SecretTable:
        """One fresh table."""
        return await open_table()

    # -- values ------------------------------------------------------------------------------

    async def test_a_secret_round_trips(self, table: SecretTable) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        assert await store.resolve(TENANT, REFERENCE) == PLAINTEXT

    async def test_unicode_empty_and_large_values_round_trip(self, table: SecretTable) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        values = {"unicode": "pässwörd-秘密-🔑", "empty": "", "large": "x" * (64 * 1024 - 8)}
        for reference, value in values.items():
            await store.put(TENANT, reference, value)
        for reference, value in values.items():
            assert await store.resolve(TENANT, reference) == value

    async def test_an_unknown_reference_is_unresolved(self, table: SecretTable) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        with pytest.raises(ProviderError) as exc:
            await store.resolve(TENANT, "never-written")
        _unresolved(exc)
        assert await table.get(TENANT, "never-written") is None

    async def test_rotating_a_value_replaces_it(self, table: SecretTable) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        first = await table.get(TENANT, REFERENCE)
        await store.put(TENANT, REFERENCE, ROTATED)
        second = await table.get(TENANT, REFERENCE)
        assert await store.resolve(TENANT, REFERENCE) == ROTATED
        assert first is not None
        assert second is not None
        # A fresh data key and nonces per write: nothing is reused across versions.
        assert first.wrapped_dek != second.wrapped_dek
        assert first.ciphertext[:12] != second.ciphertext[:12]
        assert await table.kek_usage() == {"k1": 1}

    async def test_rows_hold_no_plaintext(self, table: SecretTable) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        row = await table.get(TENANT, REFERENCE)
        assert row is not None
        stored = row.wrapped_dek + row.ciphertext
        assert not [form for form in plaintext_forms(PLAINTEXT) if form in stored]
        assert PLAINTEXT not in repr(row)

    # -- isolation ---------------------------------------------------------------------------

    async def test_the_same_reference_in_two_tenants_is_two_secrets(
        self, table: SecretTable
    ) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        await store.put(OTHER, REFERENCE, ROTATED)
        assert await store.resolve(TENANT, REFERENCE) == PLAINTEXT
        assert await store.resolve(OTHER, REFERENCE) == ROTATED
        with pytest.raises(ProviderError) as exc:
            await store.resolve("tenant-c", REFERENCE)
        _unresolved(exc)

    @pytest.mark.parametrize(
        "move",
        [
            {"tenant_id": OTHER},
            {"reference": "other-db"},
            {"tenant_id": OTHER, "reference": "other-db"},
        ],
        ids=["other-tenant", "other-reference", "both"],
    )
    async def test_a_row_moved_elsewhere_fails_closed(
        self, table: SecretTable, move: dict[str, Any]
    ) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        row = await table.get(TENANT, REFERENCE)
        assert row is not None
        moved = attrs.evolve(row, **move)
        await table.put(moved)
        with pytest.raises(ProviderError) as exc:
            await store.resolve(moved.tenant_id, moved.reference)
        _unresolved(exc)
        assert await store.resolve(TENANT, REFERENCE) == PLAINTEXT

    async def test_altered_bytes_fail_closed(self, table: SecretTable) -> None:
        store = EncryptedSecretStore(table, KeyEncryptionKeys.generate())
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        row = await table.get(TENANT, REFERENCE)
        assert row is not None

        def flip(data: bytes, at: int) -> bytes:
            return data[:at] + bytes((data[at] ^ 1,)) + data[at + 1 :]

        for altered in (
            attrs.evolve(row, ciphertext=flip(row.ciphertext, 20)),
            attrs.evolve(row, wrapped_dek=flip(row.wrapped_dek, 20)),
            attrs.evolve(row, ciphertext=row.ciphertext[:10]),
            attrs.evolve(row, version=2),
        ):
            await table.put(altered)
            with pytest.raises(ProviderError) as exc:
                await store.resolve(TENANT, REFERENCE)
            _unresolved(exc)

    # -- keys --------------------------------------------------------------------------------

    async def test_a_missing_kek_is_unresolved_not_a_crash(self, table: SecretTable) -> None:
        first = KeyEncryptionKeys.generate("k1")
        await EncryptedSecretStore(table, first).put(TENANT, REFERENCE, PLAINTEXT)
        elsewhere = EncryptedSecretStore(table, KeyEncryptionKeys.generate("k2"))
        with pytest.raises(ProviderError) as exc:
            await elsewhere.resolve(TENANT, REFERENCE)
        _unresolved(exc)
        assert await elsewhere.missing_keks() == ("k1",)

    async def test_a_wrong_key_under_the_right_id_is_unresolved(self, table: SecretTable) -> None:
        await EncryptedSecretStore(table, KeyEncryptionKeys.generate("k1")).put(
            TENANT, REFERENCE, PLAINTEXT
        )
        impostor = EncryptedSecretStore(table, KeyEncryptionKeys.generate("k1"))
        with pytest.raises(ProviderError) as exc:
            await impostor.resolve(TENANT, REFERENCE)
        _unresolved(exc)
        assert await impostor.missing_keks() == ()

    async def test_a_relabelled_kek_id_fails_closed(self, table: SecretTable) -> None:
        keys = KeyEncryptionKeys.generate("k1").with_key("k2")
        store = EncryptedSecretStore(table, keys)
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        row = await table.get(TENANT, REFERENCE)
        assert row is not None
        await table.put(attrs.evolve(row, kek_id="k2"))
        with pytest.raises(ProviderError) as exc:
            await store.resolve(TENANT, REFERENCE)
        _unresolved(exc)

    async def test_kek_rotation_rewrap_and_retire(self, table: SecretTable) -> None:
        old = KeyEncryptionKeys.generate("k1")
        store = EncryptedSecretStore(table, old)
        for tenant in (TENANT, OTHER):
            for n in range(3):
                await store.put(tenant, f"ref-{n}", f"{PLAINTEXT}-{tenant}-{n}")
        before = await table.get(TENANT, "ref-0")
        # Step 1 and 2: the new key joins, then becomes active; old rows still open.
        await store.use_keys(old.with_key("k2"))
        await store.use_keys(store.keys.activated("k2"))
        assert await store.resolve(TENANT, "ref-0") == f"{PLAINTEXT}-{TENANT}-0"
        await store.put(TENANT, "fresh", ROTATED)
        assert await table.kek_usage() == {"k1": 6, "k2": 1}
        # Retiring the old key now would strand six secrets: refused.
        with pytest.raises(KeyInUseError):
            await store.retire("k1")
        with pytest.raises(KeyInUseError):
            await store.use_keys(KeyEncryptionKeys.generate("k3"))
        # Step 3: re-wrap, resumable — one row, then the rest.
        partial = await store.rewrap(limit=1)
        assert (partial.rewrapped, partial.remaining, partial.done) == (1, 5, False)
        report = await store.rewrap(batch_size=2)
        assert (report.rewrapped, report.skipped, report.remaining) == (5, 0, 0)
        assert report.done
        again = await store.rewrap()
        assert (again.rewrapped, again.remaining) == (0, 0)
        assert await table.kek_usage() == {"k2": 7}
        after = await table.get(TENANT, "ref-0")
        assert before is not None
        assert after is not None
        # Only the wrapping changed: the value's ciphertext is the same bytes.
        assert after.ciphertext == before.ciphertext
        assert after.wrapped_dek != before.wrapped_dek
        # Step 4: retire; everything still opens without the old key.
        ring = await store.retire("k1")
        assert ring.key_ids == ("k2",)
        for tenant in (TENANT, OTHER):
            for n in range(3):
                assert await store.resolve(tenant, f"ref-{n}") == f"{PLAINTEXT}-{tenant}-{n}"
        with pytest.raises(KeyringConfigurationError):
            await store.retire("k2")

    async def test_a_host_still_on_the_old_active_key_reads_rewrapped_rows(
        self, table: SecretTable
    ) -> None:
        # Two hosts mid-rotation: one already activated k2, the other still writes with k1.
        ring = KeyEncryptionKeys.generate("k1").with_key("k2")
        lagging = EncryptedSecretStore(table, ring)
        ahead = EncryptedSecretStore(table, ring.activated("k2"))
        await lagging.put(TENANT, REFERENCE, PLAINTEXT)
        await ahead.rewrap()
        assert await lagging.resolve(TENANT, REFERENCE) == PLAINTEXT
        await lagging.put(TENANT, "late", ROTATED)
        assert await ahead.resolve(TENANT, "late") == ROTATED
        assert (await ahead.rewrap()).rewrapped == 1

    async def test_rewrap_never_overwrites_a_concurrent_rotation(self, table: SecretTable) -> None:
        ring = KeyEncryptionKeys.generate("k1").with_key("k2")
        store = EncryptedSecretStore(table, ring)
        await store.put(TENANT, REFERENCE, PLAINTEXT)
        stale = await table.get(TENANT, REFERENCE)
        assert stale is not None
        await store.put(TENANT, REFERENCE, ROTATED)  # rotated after the scan read the row
        impostor = SealedSecret(
            tenant_id=TENANT,
            reference=REFERENCE,
            kek_id="k2",
            wrapped_dek=b"\x00" * 60,
            ciphertext=b"",
        )
        assert not await table.replace_wrapping(impostor, expected_wrapped_dek=stale.wrapped_dek)
        assert not await table.replace_wrapping(
            attrs.evolve(impostor, tenant_id="nobody"), expected_wrapped_dek=stale.wrapped_dek
        )
        assert await store.resolve(TENANT, REFERENCE) == ROTATED

    async def test_rewrap_skips_rows_it_cannot_open(self, table: SecretTable) -> None:
        await EncryptedSecretStore(table, KeyEncryptionKeys.generate("k1")).put(
            TENANT, REFERENCE, PLAINTEXT
        )
        impostor = KeyEncryptionKeys.generate("k1").with_key("k2").activated("k2")
        report = await EncryptedSecretStore(table, impostor).rewrap()
        assert (report.rewrapped, report.skipped, report.remaining) == (0, 1, 1)

    async def test_list_by_kek_pages_in_key_order_across_tenants(self, table: SecretTable) -> None:
        ring = KeyEncryptionKeys.generate("k1").with_key("k2")
        store = EncryptedSecretStore(table, ring)
        expected = sorted((t, f"r{n}") for t in (OTHER, TENANT) for n in range(3))
        for tenant, reference in reversed(expected):
            await store.put(tenant, reference, PLAINTEXT)
        await EncryptedSecretStore(table, ring.activated("k2")).put(TENANT, "zz", ROTATED)
        seen: list[tuple[str, str]] = []
        after: tuple[str, str] | None = None
        while rows := await table.list_by_kek("k1", after=after, limit=4):
            assert all(r.kek_id == "k1" for r in rows)
            seen += [(r.tenant_id, r.reference) for r in rows]
            after = seen[-1]
        assert seen == expected
        assert [r.reference for r in await table.list_by_kek("k2")] == ["zz"]
        assert await table.list_by_kek("nope") == []

    async def test_nothing_secret_is_logged(
        self, table: SecretTable, caplog: pytest.LogCaptureFixture
    ) -> None:
        keys = KeyEncryptionKeys.generate("k1")
        with caplog.at_level(logging.DEBUG):
            store = EncryptedSecretStore(table, keys)
            await store.put(TENANT, REFERENCE, PLAINTEXT)
            await store.resolve(TENANT, REFERENCE)
            await store.use_keys(keys.with_key("k2").activated("k2"))
            await store.rewrap()
            row = await table.get(TENANT, REFERENCE)
            assert row is not None
            await table.put(attrs.evolve(row, tenant_id=OTHER))
            with pytest.raises(ProviderError):
                await store.resolve(OTHER, REFERENCE)
        text = caplog.text + "".join(repr(r.__dict__) for r in caplog.records)
        assert caplog.records  # the store does log what it does
        assert not [form for form in plaintext_forms(PLAINTEXT) if form.decode("latin-1") in text]
        for thing in (store, table, store.keys, row):
            assert PLAINTEXT not in repr(thing)
            assert PLAINTEXT not in str(thing)
