"""PostgresSecretTable: the ``SecretTable`` port on PostgreSQL (psycopg 3, async, pooled).

It stores only sealed rows (``esra.core._secrets.envelope``): no value or key is ever sent to
the server, so none can reach its tables, WAL, logs (``log_statement``) or a ``pg_dump``.
Every value is a bound parameter; identifiers come from configuration through
``psycopg.sql``. The re-wrap scan orders by ``COLLATE "C"`` so its keyset pagination agrees
with every other implementation whatever the database's collation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from psycopg import sql
from psycopg.rows import dict_row

from esra.core.secrets import SealedSecret
from esra.postgres._pool import Pool, open_pool
from esra.postgres._secrets_schema import DEFAULT_SECRET_SCHEMA, _check_name

__all__ = ["PostgresSecretTable"]

_COLUMNS = sql.SQL("tenant_id, reference, version, kek_id, wrapped_dek, ciphertext")


def _row(row: Mapping[str, Any]) -> SealedSecret:
    return SealedSecret(
        tenant_id=str(row["tenant_id"]),
        reference=str(row["reference"]),
        kek_id=str(row["kek_id"]),
        wrapped_dek=bytes(row["wrapped_dek"]),
        ciphertext=bytes(row["ciphertext"]),
        version=int(row["version"]),
    )


class PostgresSecretTable:
    """Sealed secrets in ``<schema>.secrets`` (``apply_secret_schema`` created it).

    Args:
        pool: an open pool of autocommit connections.
        schema: the schema holding the table.

    ``open(...)`` builds one with its own pool; ``close()`` closes a pool it owns.
    """

    def __init__(self, pool: Pool, *, schema: str = DEFAULT_SECRET_SCHEMA) -> None:
        _check_name(schema)
        self._pool = pool
        self._owns_pool = False
        self._schema = schema
        self._table = sql.Identifier(schema, "secrets")

    @classmethod
    async def open(
        cls,
        conninfo: str = "",
        *,
        kwargs: Mapping[str, Any] | None = None,
        schema: str = DEFAULT_SECRET_SCHEMA,
        min_size: int = 1,
        max_size: int = 2,
    ) -> Self:
        """Open a pool (``conninfo`` and/or ``kwargs`` from ``connect_kwargs``) and wrap it."""
        # Sealed rows hold no timestamp the table reads back: the session time zone is moot.
        pool = await open_pool(
            conninfo,
            kwargs=kwargs,
            name="esra-secrets",
            min_size=min_size,
            max_size=max_size,
            utc=False,
        )
        table = cls(pool, schema=schema)
        table._owns_pool = True
        return table

    async def close(self) -> None:
        """Close the pool if this table opened it."""
        if self._owns_pool:
            await self._pool.close()

    def _q(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(t=self._table, cols=_COLUMNS)

    async def put(self, row: SealedSecret) -> None:
        """Insert ``row`` or replace the row with the same tenant and reference."""
        async with self._pool.connection() as conn:
            await conn.execute(
                self._q(
                    "INSERT INTO {t} ({cols}) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (tenant_id, reference) DO UPDATE SET "
                    "version = excluded.version, kek_id = excluded.kek_id, "
                    "wrapped_dek = excluded.wrapped_dek, ciphertext = excluded.ciphertext, "
                    "updated_at = now()"
                ),
                (
                    row.tenant_id,
                    row.reference,
                    row.version,
                    row.kek_id,
                    row.wrapped_dek,
                    row.ciphertext,
                ),
            )

    async def get(self, tenant_id: str, reference: str) -> SealedSecret | None:
        """The row of ``tenant_id`` named ``reference``, or ``None``."""
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                self._q("SELECT {cols} FROM {t} WHERE tenant_id = %s AND reference = %s"),
                (tenant_id, reference),
            )
            found = await cur.fetchone()
        return _row(found) if found is not None else None

    async def list_by_kek(
        self, kek_id: str, *, after: tuple[str, str] | None = None, limit: int = 100
    ) -> Sequence[SealedSecret]:
        """Rows wrapped by ``kek_id`` in ``(tenant_id, reference)`` order, after ``after``."""
        start = after or ("", "")
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                self._q(
                    "SELECT {cols} FROM {t} WHERE kek_id = %s AND (NOT %s OR "
                    '(tenant_id COLLATE "C", reference COLLATE "C") > (%s, %s)) '
                    'ORDER BY tenant_id COLLATE "C", reference COLLATE "C" LIMIT %s'
                ),
                (kek_id, after is not None, start[0], start[1], limit),
            )
            rows = await cur.fetchall()
        return [_row(r) for r in rows]

    async def kek_usage(self) -> Mapping[str, int]:
        """Rows per KEK id."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(self._q("SELECT kek_id, count(*) FROM {t} GROUP BY 1"))
            rows = await cursor.fetchall()
        return {str(k): int(n) for k, n in rows}

    async def replace_wrapping(self, row: SealedSecret, *, expected_wrapped_dek: bytes) -> bool:
        """Compare-and-set the row's KEK id and wrapped data key on its old wrapping."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q(
                    "UPDATE {t} SET kek_id = %s, wrapped_dek = %s, updated_at = now() "
                    "WHERE tenant_id = %s AND reference = %s AND wrapped_dek = %s"
                ),
                (
                    row.kek_id,
                    row.wrapped_dek,
                    row.tenant_id,
                    row.reference,
                    expected_wrapped_dek,
                ),
            )
            return cursor.rowcount == 1

    def __repr__(self) -> str:
        return f"PostgresSecretTable(schema={self._schema!r})"
