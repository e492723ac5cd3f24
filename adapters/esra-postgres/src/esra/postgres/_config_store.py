"""PostgresConfigStore: the admin chain's ``WorkspaceStore`` on PostgreSQL (psycopg 3).

Drafts, every change (who, when, why, what) and every publication live in the configuration
schema (``apply_config_schema``), shared by every host on the database. Each save is one
transaction whose ``UPDATE … WHERE tenant_id = %s AND version = %s`` (or, for a tenant's
first version, ``INSERT … ON CONFLICT DO NOTHING``) changes one row or none. Under READ
COMMITTED a concurrent writer of the same row waits for the first to commit, then finds the
version moved on and changes nothing: the loser gets ``ConfigConflictError``, never a silent
overwrite. A publication is inserted in the same transaction and announced with
``pg_notify`` (delivered at commit), so hosts may LISTEN instead of polling
``published_versions``.

A save given the change's audit record inserts it into ``audit_outbox`` in the same
transaction; ``pending_audit`` reads the held records in order and ``settle_audit`` deletes one
once the audit sink has it. ``claim_audit`` hands the oldest to one forwarder at a time across
every host on the database: one transaction takes the transaction-scoped advisory lock
``esra.config.audit_outbox:<schema>`` without waiting (held: another host is forwarding),
reads the oldest record, stays open while the audit sink is handed it and deletes it before
committing. The server releases the lock at commit, at rollback, and when the session ends —
a host killed, or whose connection died, mid-forward keeps no one out. Transaction-scoped,
not a session lock, so the claim holds behind a transaction-pooling PgBouncer too.

Documents are ``jsonb`` of the core converter's output; secret values are never among them.

It is also the hosts' ``StoreStateTable``: each tenant's document store lifecycle state, so
that an administrator may enable a store through one host and initialise it through another.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from esra.core.admin import (
    AdminWorkspace,
    ConfigChange,
    ConfigConflictError,
    check_save,
    workspace_document,
    workspace_from_document,
)
from esra.core.audit import AuditRecord, record_document
from esra.core.config import ConfigSnapshot, dump_snapshot, load_snapshot
from esra.core.docstore import StoreState, StoreStatus
from esra.postgres._audit_outbox import claim_held_record, held_records
from esra.postgres._config_schema import (
    CONFIG_NOTIFY_CHANNEL,
    DEFAULT_CONFIG_SCHEMA,
    apply_config_schema,
)
from esra.postgres._connection import storable_json
from esra.postgres._pool import Pool, open_pool, ping_pool

__all__ = ["PostgresConfigStore"]

# The advisory lock of the outbox's claim, per configuration schema (the schema migrations'
# transaction locks are ``esra.config:<schema>``).
_CLAIM_LOCK = "esra.config.audit_outbox"


def _change(row: Mapping[str, Any]) -> ConfigChange:
    return ConfigChange(
        tenant_id=row["tenant_id"],
        version=int(row["version"]),
        subject=row["subject"],
        at=row["at"],
        action=row["action"],
        target=row["target"],
        reason=row["reason"],
    )


class PostgresConfigStore:
    """The ``WorkspaceStore`` port over the configuration schema.

    Args:
        pool: an open pool of autocommit connections (each method opens its own transaction).
        schema: the configuration schema (``apply_config_schema`` created it).

    ``open(...)`` applies the schema (idempotently) and builds one with its own pool;
    ``close()`` closes a pool it owns.
    """

    def __init__(self, pool: Pool, *, schema: str = DEFAULT_CONFIG_SCHEMA) -> None:
        self._pool = pool
        self._owns_pool = False
        self._schema = schema
        self._tables = {
            "w": sql.Identifier(schema, "workspaces"),
            "c": sql.Identifier(schema, "changes"),
            "p": sql.Identifier(schema, "published"),
            "s": sql.Identifier(schema, "store_states"),
            "o": sql.Identifier(schema, "audit_outbox"),
        }

    @classmethod
    async def open(
        cls,
        conninfo: str = "",
        *,
        kwargs: Mapping[str, Any] | None = None,
        schema: str = DEFAULT_CONFIG_SCHEMA,
        apply_schema: bool = True,
        min_size: int = 1,
        max_size: int = 4,
    ) -> Self:
        """Open a pool (``conninfo`` and/or ``kwargs``), apply the schema, and wrap it."""

        async def prepare(conn: psycopg.AsyncConnection[Any]) -> None:
            await apply_config_schema(conn, schema)

        pool = await open_pool(
            conninfo,
            kwargs=kwargs,
            name="esra-config",
            min_size=min_size,
            max_size=max_size,
            prepare=prepare if apply_schema else None,
        )
        store = cls(pool, schema=schema)
        store._owns_pool = True
        return store

    async def close(self) -> None:
        """Close the pool if this store opened it."""
        if self._owns_pool:
            await self._pool.close()

    async def ping(self) -> None:
        """``SELECT 1`` on the pool (for the host's readiness check); raises if it cannot."""
        await ping_pool(self._pool)

    def _q(self, text: str) -> sql.Composed:
        # Identifiers come from configuration; every value is a bound parameter.
        return sql.SQL(text).format(**self._tables)

    async def _one(
        self, statement: sql.Composed, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement, params)
            return await cur.fetchone()

    # -- the port --------------------------------------------------------------------------

    async def load(self, tenant_id: str) -> AdminWorkspace | None:
        """The tenant's current workspace, or ``None`` before its first save."""
        row = await self._one(
            self._q("SELECT document FROM {w} WHERE tenant_id = %(tenant)s"), {"tenant": tenant_id}
        )
        return workspace_from_document(row["document"]) if row is not None else None

    async def save(
        self,
        workspace: AdminWorkspace,
        *,
        expected_version: int,
        change: ConfigChange,
        audit: AuditRecord | None = None,
    ) -> None:
        """Store ``workspace`` if the tenant is still at ``expected_version``; hold ``audit``."""
        check_save(workspace, expected_version, change)
        params = {
            "tenant": workspace.tenant_id,
            "version": workspace.version,
            "expected": expected_version,
            "published_version": workspace.published_version,
            "document": Jsonb(workspace_document(workspace)),
            "at": change.at,
            "subject": change.subject,
            "action": change.action,
            "target": change.target,
            "reason": change.reason,
        }
        if expected_version == 0:
            write = self._q(
                "INSERT INTO {w} (tenant_id, version, published_version, document, updated_at)"
                " VALUES (%(tenant)s, %(version)s, %(published_version)s, %(document)s, %(at)s)"
                " ON CONFLICT (tenant_id) DO NOTHING"
            )
        else:
            write = self._q(
                "UPDATE {w} SET version = %(version)s, published_version = %(published_version)s,"
                " document = %(document)s, updated_at = %(at)s"
                " WHERE tenant_id = %(tenant)s AND version = %(expected)s"
            )
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(write, params)
            if cursor.rowcount != 1:
                found = await conn.execute(
                    self._q("SELECT version FROM {w} WHERE tenant_id = %(tenant)s"), params
                )
                row = await found.fetchone()
                current = int(row[0]) if row is not None else None
                raise ConfigConflictError(
                    workspace.tenant_id, expected=expected_version, current=current
                )
            await conn.execute(
                self._q(
                    "INSERT INTO {c} (tenant_id, version, subject, at, action, target, reason,"
                    " document) VALUES (%(tenant)s, %(version)s, %(subject)s, %(at)s,"
                    " %(action)s, %(target)s, %(reason)s, %(document)s)"
                ),
                params,
            )
            if workspace.published_version == workspace.version:
                await conn.execute(
                    self._q(
                        "INSERT INTO {p} (tenant_id, version, snapshot, published_at)"
                        " VALUES (%(tenant)s, %(version)s, %(snapshot)s, %(at)s)"
                    ),
                    {**params, "snapshot": Jsonb(dump_snapshot(workspace.snapshot))},
                )
                await conn.execute(
                    "SELECT pg_notify(%s, %s)",
                    (
                        CONFIG_NOTIFY_CHANNEL,
                        f"{self._schema} {workspace.tenant_id} {workspace.version}",
                    ),
                )
            if audit is not None:
                await self._hold(conn, audit)

    async def _hold(self, conn: psycopg.AsyncConnection[Any], audit: AuditRecord) -> None:
        """Insert ``audit`` into the outbox, in the transaction ``conn`` is in."""
        await conn.execute(
            self._q("INSERT INTO {o} (correlation_id, record) VALUES (%(id)s, %(record)s)"),
            {"id": audit.correlation_id, "record": Jsonb(storable_json(record_document(audit)))},
        )

    async def pending_audit(self) -> list[AuditRecord]:
        """Every held audit record, every tenant's, in the order they were saved (rows set
        aside, or this version cannot decode, left out)."""
        return await held_records(self._pool, self._tables["o"], f"{_CLAIM_LOCK}:{self._schema}")

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the held record with ``correlation_id`` (the audit sink has it)."""
        async with self._pool.connection() as conn:
            await conn.execute(
                self._q("DELETE FROM {o} WHERE correlation_id = %(id)s"), {"id": correlation_id}
            )

    def claim_audit(self) -> AbstractAsyncContextManager[AuditRecord | None]:
        """The oldest held record while the block runs, deleted when it completes (``None``:
        nothing held, or another host or handle is forwarding)."""
        return claim_held_record(self._pool, self._tables["o"], f"{_CLAIM_LOCK}:{self._schema}")

    async def history(self, tenant_id: str) -> list[ConfigChange]:
        """Every change saved for the tenant, oldest first."""
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                self._q(
                    "SELECT tenant_id, version, subject, at, action, target, reason FROM {c}"
                    " WHERE tenant_id = %(tenant)s ORDER BY version"
                ),
                {"tenant": tenant_id},
            )
            return [_change(row) for row in await cur.fetchall()]

    async def workspace_at(self, tenant_id: str, version: int) -> AdminWorkspace | None:
        """The workspace as it was saved at ``version``, if that version exists."""
        row = await self._one(
            self._q(
                "SELECT document FROM {c} WHERE tenant_id = %(tenant)s AND version = %(version)s"
            ),
            {"tenant": tenant_id, "version": version},
        )
        return workspace_from_document(row["document"]) if row is not None else None

    async def published(self, tenant_id: str) -> ConfigSnapshot | None:
        """The tenant's latest publication, or ``None`` if it never published."""
        row = await self._one(
            self._q(
                "SELECT snapshot FROM {p} WHERE tenant_id = %(tenant)s"
                " ORDER BY version DESC LIMIT 1"
            ),
            {"tenant": tenant_id},
        )
        return load_snapshot(row["snapshot"]) if row is not None else None

    async def published_at(self, tenant_id: str, version: int) -> ConfigSnapshot | None:
        """The snapshot published at workspace ``version``."""
        row = await self._one(
            self._q(
                "SELECT snapshot FROM {p} WHERE tenant_id = %(tenant)s AND version = %(version)s"
            ),
            {"tenant": tenant_id, "version": version},
        )
        return load_snapshot(row["snapshot"]) if row is not None else None

    # -- the document stores' shared lifecycle state (``StoreStateTable``) -------------------

    async def read_store_state(self, tenant_id: str) -> StoreState | None:
        """The tenant's store state as the last administrative action set it."""
        row = await self._one(
            self._q(
                "SELECT status, changed_at, failure, remedy FROM {s} WHERE tenant_id = %(tenant)s"
            ),
            {"tenant": tenant_id},
        )
        if row is None:
            return None
        return StoreState(
            status=StoreStatus(row["status"]),
            changed_at=row["changed_at"],
            failure=row["failure"],
            remedy=row["remedy"],
        )

    async def write_store_state(
        self, tenant_id: str, state: StoreState, *, audit: AuditRecord | None = None
    ) -> None:
        """Record ``state`` as the tenant's store state, holding ``audit`` in the outbox in
        the same transaction."""
        params = _state_params(tenant_id, state)
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                self._q(
                    "INSERT INTO {s} (tenant_id, status, changed_at, failure, remedy)"
                    " VALUES (%(tenant)s, %(status)s, %(at)s, %(failure)s, %(remedy)s)"
                    " ON CONFLICT (tenant_id) DO UPDATE SET status = EXCLUDED.status,"
                    " changed_at = EXCLUDED.changed_at, failure = EXCLUDED.failure,"
                    " remedy = EXCLUDED.remedy"
                ),
                params,
            )
            if audit is not None:
                await self._hold(conn, audit)

    async def replace_store_state(
        self, tenant_id: str, expected: StoreState, state: StoreState, *, audit: AuditRecord
    ) -> bool:
        """``write_store_state`` if the tenant's state still has ``expected``'s status and
        ``changed_at`` (the UPDATE's row lock decides between processes replacing at once)."""
        params = {
            **_state_params(tenant_id, state),
            "expected_status": expected.status.value,
            "expected_at": expected.changed_at,
        }
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                self._q(
                    "UPDATE {s} SET status = %(status)s, changed_at = %(at)s,"
                    " failure = %(failure)s, remedy = %(remedy)s WHERE tenant_id = %(tenant)s"
                    " AND status = %(expected_status)s AND changed_at = %(expected_at)s"
                ),
                params,
            )
            if cursor.rowcount != 1:
                return False
            await self._hold(conn, audit)
            return True

    async def published_versions(self) -> dict[str, int]:
        """Each tenant's latest published version (one aggregate over the primary key)."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                self._q("SELECT tenant_id, max(version) FROM {p} GROUP BY tenant_id")
            )
            return {str(tenant): int(version) for tenant, version in await cursor.fetchall()}


def _state_params(tenant_id: str, state: StoreState) -> dict[str, object]:
    """The bind values of a tenant's store state row."""
    return {
        "tenant": tenant_id,
        "status": state.status.value,
        "at": state.changed_at,
        "failure": state.failure,
        "remedy": state.remedy,
    }
