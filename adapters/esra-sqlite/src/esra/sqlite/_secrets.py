"""SqliteSecretTable: the ``SecretTable`` port on one SQLite file (the embedded default).

It stores only sealed rows (``esra.core._secrets.envelope``): no value or key ever reaches
SQLite, its WAL or its journal. Like ``SqliteDocumentRepository`` it runs every statement
on one dedicated thread over one connection in WAL mode with a busy timeout, so other
processes may share the file. Every value is a bound parameter.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from esra.core.secrets import SealedSecret
from esra.sqlite._dedicated_connection import DedicatedConnection
from esra.sqlite._secrets_schema import apply_secret_schema

__all__ = ["SqliteSecretTable"]

_COLUMNS = "tenant_id, reference, version, kek_id, wrapped_dek, ciphertext"


def _row(row: sqlite3.Row) -> SealedSecret:
    return SealedSecret(
        tenant_id=str(row["tenant_id"]),
        reference=str(row["reference"]),
        kek_id=str(row["kek_id"]),
        wrapped_dek=bytes(row["wrapped_dek"]),
        ciphertext=bytes(row["ciphertext"]),
        version=int(row["version"]),
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class SqliteSecretTable:
    """Sealed secrets in the ``esra_secrets`` table of ``database``.

    Call ``initialize()`` once (it applies the schema idempotently) before use, and
    ``close()`` when done.
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self._db = DedicatedConnection(
            database,
            thread_name="esra-secrets",
            # Freed pages are zeroed, so a rotated row's old bytes do not linger in the file.
            pragmas=("PRAGMA secure_delete = ON",),
        )

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    async def initialize(self) -> int:
        """Apply the secret schema (idempotent); return the schema version now recorded."""
        return await self._db.run(apply_secret_schema)

    async def close(self) -> None:
        """Close the connection once queued work has finished, and stop the thread."""
        await self._db.close()

    async def put(self, row: SealedSecret) -> None:
        """Insert ``row`` or replace the row with the same tenant and reference."""

        def upsert(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT INTO esra_secrets (tenant_id, reference, version, kek_id, wrapped_dek, "
                "ciphertext, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, reference) DO UPDATE SET version = excluded.version, "
                "kek_id = excluded.kek_id, wrapped_dek = excluded.wrapped_dek, "
                "ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
                (
                    row.tenant_id,
                    row.reference,
                    row.version,
                    row.kek_id,
                    row.wrapped_dek,
                    row.ciphertext,
                    _now(),
                ),
            )

        await self._db.run(upsert)

    async def get(self, tenant_id: str, reference: str) -> SealedSecret | None:
        """The row of ``tenant_id`` named ``reference``, or ``None``."""

        def select(connection: sqlite3.Connection) -> SealedSecret | None:
            found = connection.execute(
                f"SELECT {_COLUMNS} FROM esra_secrets WHERE tenant_id = ? AND reference = ?",  # noqa: S608 - constant column list
                (tenant_id, reference),
            ).fetchone()
            return _row(found) if found is not None else None

        return await self._db.run(select)

    async def list_by_kek(
        self, kek_id: str, *, after: tuple[str, str] | None = None, limit: int = 100
    ) -> Sequence[SealedSecret]:
        """Rows wrapped by ``kek_id`` in ``(tenant_id, reference)`` order, after ``after``."""
        start = after or ("", "")
        strict = after is not None

        def select(connection: sqlite3.Connection) -> list[SealedSecret]:
            rows = connection.execute(
                f"SELECT {_COLUMNS} FROM esra_secrets WHERE kek_id = ? "  # noqa: S608 - constant column list
                "AND (? = 0 OR (tenant_id, reference) > (?, ?)) "
                "ORDER BY tenant_id, reference LIMIT ?",
                (kek_id, int(strict), start[0], start[1], limit),
            ).fetchall()
            return [_row(r) for r in rows]

        return await self._db.run(select)

    async def kek_usage(self) -> Mapping[str, int]:
        """Rows per KEK id."""

        def select(connection: sqlite3.Connection) -> dict[str, int]:
            rows = connection.execute(
                "SELECT kek_id, count(*) FROM esra_secrets GROUP BY kek_id"
            ).fetchall()
            return {str(r[0]): int(r[1]) for r in rows}

        return await self._db.run(select)

    async def replace_wrapping(self, row: SealedSecret, *, expected_wrapped_dek: bytes) -> bool:
        """Compare-and-set the row's KEK id and wrapped data key on its old wrapping."""

        def update(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "UPDATE esra_secrets SET kek_id = ?, wrapped_dek = ?, updated_at = ? "
                "WHERE tenant_id = ? AND reference = ? AND wrapped_dek = ?",
                (
                    row.kek_id,
                    row.wrapped_dek,
                    _now(),
                    row.tenant_id,
                    row.reference,
                    expected_wrapped_dek,
                ),
            )
            return cursor.rowcount == 1

        return await self._db.run(update)

    def __repr__(self) -> str:
        return f"SqliteSecretTable(path={os.fspath(self._db.path)!r})"
