"""Envelope encryption of stored secrets: the keyring, sealing, and the store's contract in memory.

The regression this guards: before, the only writable store (``InMemorySecretVault``) kept
values in the clear and nothing persisted them; these tests pin the encrypted store that
replaces it — a value never leaves sealed except through ``resolve`` for its own tenant and
reference, a bad keyring is a classified configuration error, and no key or value reaches a
``repr`` or a log.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
from pathlib import Path

import attrs
import pytest

from esra.core._secrets.envelope import rewrap, seal, unseal
from esra.core._secrets.table import SecretTable
from esra.core.codes import ErrorCode, ProviderErrorCode
from esra.core.exceptions import ConfigurationError, ProviderError
from esra.core.secrets import (
    EncryptedSecretStore,
    EnvelopeOpenError,
    KeyEncryptionKeys,
    KeyringConfigurationError,
    RewrapReport,
)
from esra.core.testing._secret_table import InMemorySecretTable
from esra.core.testing.secret_contract import PLAINTEXT, SecretTableContract, plaintext_forms

KEY_A = bytes(range(32))
KEY_B = bytes(range(100, 132))


def _b64(material: bytes) -> str:
    return base64.b64encode(material).decode()


def _keyring_json(active: str = "k1", **keys: bytes) -> str:
    return json.dumps({"active": active, "keys": {k: _b64(v) for k, v in keys.items()}})


def _private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


class TestInMemorySecretTableContract(SecretTableContract):
    """The whole contract against the in-memory table."""

    def make_table(self, tmp_path: Path) -> SecretTable:
        del tmp_path
        return InMemorySecretTable()


class TestKeyringLoading:
    def test_a_keyring_file_loads(self, tmp_path: Path) -> None:
        path = _private_file(tmp_path / "kek.json", _keyring_json("k2", k1=KEY_A, k2=KEY_B))
        keys = KeyEncryptionKeys.from_file(path)
        assert keys.active_key_id == "k2"
        assert keys.key_ids == ("k1", "k2")

    def test_url_safe_and_unpadded_base64_load(self) -> None:
        text = json.dumps(
            {"active": "k1", "keys": {"k1": base64.urlsafe_b64encode(KEY_A).decode().rstrip("=")}}
        )
        assert KeyEncryptionKeys.parse(text).key_ids == ("k1",)

    def test_a_keyring_variable_loads(self) -> None:
        environ = {"ESRA_SECRET_KEYS": _keyring_json(k1=KEY_A)}
        assert KeyEncryptionKeys.from_env("ESRA_SECRET_KEYS", environ).active_key_id == "k1"

    @pytest.mark.parametrize(
        "text",
        [
            "",
            "not json",
            "[]",
            json.dumps({"active": "k1"}),
            json.dumps({"active": "k1", "keys": {}}),
            json.dumps({"active": "k1", "keys": {"k1": _b64(KEY_A)}, "extra": 1}),
            _keyring_json("k9", k1=KEY_A),
            json.dumps({"active": "k1", "keys": {"k1": _b64(KEY_A)[:-4]}}),  # 30 bytes
            json.dumps({"active": "k1", "keys": {"k1": _b64(KEY_A + b"x")}}),  # 33 bytes
            json.dumps({"active": "k1", "keys": {"k1": _b64(b"\x00" * 32)}}),  # weak
            json.dumps({"active": "k1", "keys": {"k1": _b64(b"password" * 4)}}),  # weak
            json.dumps({"active": "k1", "keys": {"k1": "not base64 at all!"}}),
            json.dumps({"active": "k1", "keys": {"k1": 12}}),
            json.dumps({"active": "bad id!", "keys": {"bad id!": _b64(KEY_A)}}),
            json.dumps({"active": "k1", "keys": {"k1": _b64(KEY_A), "k2": _b64(KEY_A)}}),
        ],
        ids=[
            "empty",
            "not-json",
            "a-list",
            "no-keys",
            "zero-keys",
            "unknown-member",
            "active-missing",
            "short",
            "long",
            "zeros",
            "repeated-text",
            "not-base64",
            "not-a-string",
            "bad-id",
            "duplicate-material",
        ],
    )
    def test_a_bad_keyring_is_a_classified_error_without_key_material(self, text: str) -> None:
        with pytest.raises(KeyringConfigurationError) as exc:
            KeyEncryptionKeys.parse(text)
        assert exc.value.code is ErrorCode.ESRA_CONFIGURATION_INVALID
        assert isinstance(exc.value, ConfigurationError)
        assert _b64(KEY_A) not in str(exc.value)
        assert exc.value.__cause__ is None or not isinstance(exc.value.__cause__, ValueError)

    @pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
    def test_a_key_file_open_to_group_or_others_is_refused(self, tmp_path: Path, mode: int) -> None:
        path = _private_file(tmp_path / "kek.json", _keyring_json(k1=KEY_A), mode)
        with pytest.raises(KeyringConfigurationError, match="chmod 600"):
            KeyEncryptionKeys.from_file(path)

    def test_a_missing_symlinked_or_directory_key_file_is_refused(self, tmp_path: Path) -> None:
        real = _private_file(tmp_path / "kek.json", _keyring_json(k1=KEY_A))
        link = tmp_path / "link.json"
        link.symlink_to(real)
        for path in (tmp_path / "absent.json", link, tmp_path):
            with pytest.raises(KeyringConfigurationError):
                KeyEncryptionKeys.from_file(path)

    def test_a_wrong_key_file_is_refused(self, tmp_path: Path) -> None:
        # A file of the wrong kind (a PEM key, say) where the keyring should be.
        path = _private_file(tmp_path / "kek.json", "-----BEGIN PRIVATE KEY-----\nMIIE\n")
        with pytest.raises(KeyringConfigurationError, match="not valid JSON"):
            KeyEncryptionKeys.from_file(path)
        binary = tmp_path / "kek.bin"
        binary.write_bytes(os.urandom(32) + b"\xff")
        binary.chmod(0o600)
        with pytest.raises(KeyringConfigurationError):
            KeyEncryptionKeys.from_file(binary)

    def test_an_unset_variable_is_refused(self) -> None:
        with pytest.raises(KeyringConfigurationError, match="unset"):
            KeyEncryptionKeys.from_env("ESRA_SECRET_KEYS", {})

    def test_rotation_helpers_refuse_misuse(self) -> None:
        keys = KeyEncryptionKeys({"k1": KEY_A}, active="k1")
        with pytest.raises(KeyringConfigurationError):
            keys.with_key("k1")
        with pytest.raises(KeyringConfigurationError):
            keys.with_key("k2", KEY_A)  # same material under a second id
        with pytest.raises(KeyringConfigurationError):
            keys.with_key("k2", b"short")
        with pytest.raises(KeyringConfigurationError):
            keys.activated("k2")
        with pytest.raises(KeyringConfigurationError):
            keys.without("k1")
        rotated = keys.with_key("k2", KEY_B).activated("k2").without("k1")
        assert (rotated.active_key_id, rotated.key_ids) == ("k2", ("k2",))
        assert keys.key_ids == ("k1",)  # the original ring is unchanged

    def test_a_keyring_shows_no_key_material_and_cannot_be_pickled(self) -> None:
        keys = KeyEncryptionKeys({"k1": KEY_A, "k2": KEY_B}, active="k2")
        shown = repr(keys) + str(keys)
        for material in (KEY_A, KEY_B):
            assert not [f for f in plaintext_forms(material) if f.decode("latin-1") in shown]
        assert "k1" in shown
        assert "k2" in shown
        with pytest.raises(TypeError):
            pickle.dumps(keys)


class TestEnvelope:
    def test_a_sealed_value_opens_only_for_its_tenant_and_reference(self) -> None:
        keys = KeyEncryptionKeys.generate()
        sealed = seal("t", "r", PLAINTEXT, keys)
        assert unseal(sealed, keys) == PLAINTEXT
        for moved in (attrs.evolve(sealed, tenant_id="u"), attrs.evolve(sealed, reference="s")):
            with pytest.raises(EnvelopeOpenError):
                unseal(moved, keys)

    def test_the_ciphertext_length_hides_the_value_length(self) -> None:
        keys = KeyEncryptionKeys.generate()
        lengths = {len(seal("t", "r", "x" * n, keys).ciphertext) for n in range(1, 28)}
        assert lengths == {12 + 32 + 16}

    def test_a_value_over_64_kib_is_refused(self) -> None:
        with pytest.raises(ValueError, match="64 KiB"):
            seal("t", "r", "x" * (64 * 1024 + 1), KeyEncryptionKeys.generate())

    def test_rewrap_keeps_the_value_ciphertext(self) -> None:
        keys = KeyEncryptionKeys.generate("k1")
        sealed = seal("t", "r", PLAINTEXT, keys)
        both = keys.with_key("k2")
        moved = rewrap(sealed, both.activated("k2"))
        assert moved.kek_id == "k2"
        assert moved.ciphertext == sealed.ciphertext
        with pytest.raises(EnvelopeOpenError):
            unseal(moved, keys)  # k2 is not in the old ring
        assert unseal(moved, both.activated("k2").without("k1")) == PLAINTEXT


class TestEncryptedSecretStore:
    async def test_bad_input_is_a_configuration_error(self) -> None:
        store = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate())
        for tenant, reference, value in (("", "r", "v"), ("t", "", "v"), ("t", "r", 5)):
            with pytest.raises(ConfigurationError):
                await store.put(tenant, reference, value)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="64 KiB"):
            await store.put("t", "r", "x" * (64 * 1024 + 1))
        with pytest.raises(ConfigurationError):
            await store.rewrap(batch_size=0)

    async def test_a_non_string_lookup_is_unresolved(self) -> None:
        store = EncryptedSecretStore(InMemorySecretTable(), KeyEncryptionKeys.generate())
        with pytest.raises(ProviderError) as exc:
            await store.resolve("t", None)  # type: ignore[arg-type]
        assert exc.value.code is ProviderErrorCode.SECRET_UNRESOLVED

    async def test_every_object_reprs_without_secrets(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        keys = KeyEncryptionKeys({"k1": KEY_A}, active="k1")
        table = InMemorySecretTable()
        store = EncryptedSecretStore(table, keys)
        with caplog.at_level(logging.DEBUG):
            await store.put("t", "r", PLAINTEXT)
            await store.resolve("t", "r")
            await store.use_keys(keys.with_key("k2", KEY_B).activated("k2"))
            report = await store.rewrap()
        row = await table.get("t", "r")
        shown = "".join(repr(o) + str(o) for o in (store, table, keys, store.keys, row, report))
        shown += caplog.text + "".join(repr(r.__dict__) for r in caplog.records)
        for secret in (PLAINTEXT.encode(), KEY_A, KEY_B):
            assert not [f for f in plaintext_forms(secret) if f.decode("latin-1") in shown]
        assert isinstance(report, RewrapReport)
        assert report.done
