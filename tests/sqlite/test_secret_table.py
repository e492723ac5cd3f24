"""The encrypted secret table on SQLite: the contract, its schema, and a plaintext scan.

The scan is the issue's acceptance test for the embedded default: after secrets are written,
rotated, re-wrapped under a new KEK and read back, neither the database file nor its WAL
holds any secret value or key, raw or as hex/base64/UTF-16 — and the scanner is shown to
find a plaintext that *is* there, so a pass means something.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from esra.core._secrets.table import SecretTable
from esra.core.secrets import EncryptedSecretStore, KeyEncryptionKeys
from esra.core.testing.secret_contract import SecretTableContract, plaintext_forms
from esra.sqlite._secrets import SqliteSecretTable
from esra.sqlite._secrets_schema import (
    SECRET_SCHEMA_VERSION,
    apply_secret_schema,
    secret_schema_version,
)

KEK_1 = bytes(range(7, 39))
KEK_2 = bytes(range(151, 183))


class TestSqliteSecretTableContract(SecretTableContract):
    """Every rule of the port, on one SQLite file."""

    async def make_table(self, tmp_path: Path) -> SecretTable:
        table = SqliteSecretTable(tmp_path / "esra.db")
        await table.initialize()
        return table


def _leaks(data: bytes, secrets: list[str | bytes]) -> list[tuple[int, bytes]]:
    return [
        (i, form)
        for i, secret in enumerate(secrets)
        for form in plaintext_forms(secret)
        if form in data
    ]


def _file_bytes(path: Path) -> bytes:
    parts = [path, Path(f"{path}-wal"), Path(f"{path}-journal")]
    return b"".join(p.read_bytes() for p in parts if p.exists())


async def test_no_plaintext_secret_in_the_database_file_or_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "esra.db"
    values = [f"sqlite-plaintext-{n}-Hk3#correct horse battery" for n in range(4)]
    table = SqliteSecretTable(path)
    await table.initialize()
    keys = KeyEncryptionKeys({"k1": KEK_1}, active="k1")
    store = EncryptedSecretStore(table, keys)
    for n, value in enumerate(values):
        await store.put("tenant-a", f"ref-{n}", value + "-old")
        await store.put("tenant-a", f"ref-{n}", value)  # rotated: the old value must go too
        await store.put("tenant-b", f"ref-{n}", value)
    await store.use_keys(keys.with_key("k2", KEK_2).activated("k2"))
    assert (await store.rewrap()).done
    await store.retire("k1")
    for n, value in enumerate(values):
        assert await store.resolve("tenant-a", f"ref-{n}") == value
    secrets: list[str | bytes] = [*values, *(v + "-old" for v in values), KEK_1, KEK_2]
    # While open: the WAL holds the recent writes, uncheckpointed.
    assert Path(f"{path}-wal").stat().st_size > 0
    live = _file_bytes(path)
    assert b"tenant-a" in live
    assert b"ref-0" in live
    assert _leaks(live, secrets) == []
    await table.close()
    assert _leaks(_file_bytes(path), secrets) == []


async def test_the_scan_finds_a_plaintext_that_is_there(tmp_path: Path) -> None:
    path = tmp_path / "control.db"
    value = "control-plaintext-Zz9!abc"
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("CREATE TABLE naive (value BLOB)")
    connection.execute("INSERT INTO naive VALUES (?)", (value.encode().hex().encode(),))
    connection.commit()
    assert _leaks(_file_bytes(path), [value]) != []
    connection.close()


async def test_the_schema_applies_once_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "esra.db"
    keys = KeyEncryptionKeys.generate()
    first = SqliteSecretTable(path)
    assert await first.initialize() == SECRET_SCHEMA_VERSION
    assert await first.initialize() == SECRET_SCHEMA_VERSION
    await EncryptedSecretStore(first, keys).put("t", "r", "persisted")
    await first.close()
    second = SqliteSecretTable(path)
    await second.initialize()
    assert await EncryptedSecretStore(second, keys).resolve("t", "r") == "persisted"
    await second.close()
    with sqlite3.connect(path) as connection:
        assert secret_schema_version(connection) == SECRET_SCHEMA_VERSION
        versions = connection.execute("SELECT version FROM esra_secrets_schema").fetchall()
    connection.close()
    assert versions == [(1,)]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "esra.db", isolation_level=None)
    apply_secret_schema(connection)
    connection.execute("INSERT INTO esra_secrets_schema VALUES (99, 'later')")
    with pytest.raises(RuntimeError, match="newer"):
        apply_secret_schema(connection)
    assert secret_schema_version(connection) == 99
    connection.close()


def test_it_shares_a_file_with_the_document_store(tmp_path: Path) -> None:
    from esra.sqlite._docstore_schema import STORE_SCHEMA_VERSION, apply_store_schema

    connection = sqlite3.connect(tmp_path / "esra.db", isolation_level=None)
    apply_store_schema(connection)
    assert apply_secret_schema(connection) == SECRET_SCHEMA_VERSION
    assert apply_store_schema(connection) == STORE_SCHEMA_VERSION
    connection.close()
