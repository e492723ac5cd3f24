"""The encrypted secret table on real PostgreSQL: the contract, its schema, a pg_dump scan.

The scan is the issue's acceptance test: after secrets are written, rotated, re-wrapped
under a new KEK and read back, ``pg_dump`` of the schema holds no secret value or key, raw or
as hex (how ``bytea`` is dumped), base64 or UTF-16 — and the scan is shown to find a
plaintext that *is* there, so a pass means something.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from esra.core._secrets.table import SecretTable
from esra.core.secrets import EncryptedSecretStore, KeyEncryptionKeys
from esra.core.testing.secret_contract import SecretTableContract, plaintext_forms
from esra.postgres._secrets import PostgresSecretTable
from esra.postgres._secrets_schema import (
    SECRET_SCHEMA_VERSION,
    SecretSchemaVersionError,
    apply_secret_schema,
    secret_schema_version,
)

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

KEK_1 = bytes(range(3, 35))
KEK_2 = bytes(range(201, 233))


async def _drop(dsn: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


class _SchemaTable(PostgresSecretTable):
    """Drops its private schema on close."""

    dsn: str
    schema_name: str

    async def close(self) -> None:
        await super().close()
        await _drop(self.dsn, self.schema_name)


async def _open_table(dsn: str) -> _SchemaTable:
    schema = f"esra_test_secrets_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await apply_secret_schema(conn, schema)
    table = await _SchemaTable.open(dsn, schema=schema)
    table.dsn, table.schema_name = dsn, schema
    return table


class TestPostgresSecretTableContract(SecretTableContract):
    """Every rule of the port, on PostgreSQL."""

    @pytest.fixture(autouse=True)
    def _dsn(self, pg_dsn: str) -> None:
        self.dsn = pg_dsn

    async def make_table(self, tmp_path: Path) -> SecretTable:
        del tmp_path
        return await _open_table(self.dsn)


@pytest.fixture
async def table(pg_dsn: str) -> AsyncIterator[_SchemaTable]:
    opened = await _open_table(pg_dsn)
    yield opened
    await opened.close()


def _pg_dump(dsn: str, schema: str) -> bytes:
    executable = shutil.which("pg_dump")
    if executable is None:
        pytest.fail("pg_dump is not installed")
    done = subprocess.run(  # noqa: S603 - fixed executable, arguments from the test
        [executable, "--dbname", dsn, "--schema", schema, "--no-owner"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return done.stdout


def _leaks(data: bytes, secrets: list[str | bytes]) -> list[tuple[int, bytes]]:
    return [
        (i, form)
        for i, secret in enumerate(secrets)
        for form in plaintext_forms(secret)
        if form in data
    ]


async def test_no_plaintext_secret_in_a_pg_dump(table: _SchemaTable, pg_dsn: str) -> None:
    values = [f"pg-plaintext-{n}-Jm4$correct horse battery" for n in range(4)]
    keys = KeyEncryptionKeys({"k1": KEK_1}, active="k1")
    store = EncryptedSecretStore(table, keys)
    for n, value in enumerate(values):
        await store.put("tenant-a", f"ref-{n}", value + "-old")
        await store.put("tenant-a", f"ref-{n}", value)
        await store.put("tenant-b", f"ref-{n}", value)
    before_rewrap = _pg_dump(pg_dsn, table.schema_name)
    await store.use_keys(keys.with_key("k2", KEK_2).activated("k2"))
    assert (await store.rewrap()).done
    await store.retire("k1")
    for n, value in enumerate(values):
        assert await store.resolve("tenant-b", f"ref-{n}") == value
    secrets: list[str | bytes] = [*values, *(v + "-old" for v in values), KEK_1, KEK_2]
    dump = _pg_dump(pg_dsn, table.schema_name)
    assert b"tenant-a\tref-0\t" in dump  # the dump does hold the rows
    assert _leaks(before_rewrap, secrets) == []
    assert _leaks(dump, secrets) == []


async def test_the_dump_scan_finds_a_plaintext_that_is_there(
    table: _SchemaTable, pg_dsn: str
) -> None:
    value = "control-plaintext-Pq8%xyz"
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
        naive = sql.Identifier(table.schema_name, "naive")
        await conn.execute(sql.SQL("CREATE TABLE {} (value bytea)").format(naive))
        await conn.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(naive), (value.encode(),))
    assert _leaks(_pg_dump(pg_dsn, table.schema_name), [value]) != []


async def test_the_schema_applies_once_and_rows_survive_a_new_pool(pg_dsn: str) -> None:
    schema = f"esra_test_secrets_{uuid.uuid4().hex[:12]}"
    keys = KeyEncryptionKeys.generate()
    try:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            assert await secret_schema_version(conn, schema) == 0
            assert await apply_secret_schema(conn, schema) is True
            assert await apply_secret_schema(conn, schema) is False
            assert await secret_schema_version(conn, schema) == SECRET_SCHEMA_VERSION
        first = await PostgresSecretTable.open(pg_dsn, schema=schema)
        await EncryptedSecretStore(first, keys).put("t", "r", "persisted")
        await first.close()
        second = await PostgresSecretTable.open(pg_dsn, schema=schema)
        assert await EncryptedSecretStore(second, keys).resolve("t", "r") == "persisted"
        await second.close()
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (99)").format(
                    sql.Identifier(schema, "secret_schema_version")
                )
            )
            with pytest.raises(SecretSchemaVersionError):
                await apply_secret_schema(conn, schema)
    finally:
        await _drop(pg_dsn, schema)


def test_a_bad_schema_name_is_refused() -> None:
    with pytest.raises(ValueError, match="lowercase identifier"):
        PostgresSecretTable(None, schema='x"; DROP TABLE y')  # type: ignore[arg-type]
