"""SqliteConfigStore: the admin chain's ``WorkspaceStore`` on one SQLite file, no server.

The embedded default's durable configuration: drafts, every change (who, when, why, what)
and every publication survive a restart. WAL journal and a busy timeout, so several
processes may share the file; every save is one ``BEGIN IMMEDIATE`` transaction whose
``UPDATE … WHERE tenant_id = ? AND version = ?`` (or, for a tenant's first version,
``INSERT … ON CONFLICT DO NOTHING``) changes exactly one row or none — none is a stale
write, answered ``ConfigConflictError`` with nothing written.

Documents are the core converter's JSON (``esra.core.admin.workspace_document``);
secret values are never among them. The schema (``config_schema``) is applied, idempotently,
when the store is first used.

A save given the change's audit record inserts it into ``config_audit_outbox`` in the same
transaction; ``pending_audit`` reads the held records in order and ``settle_audit`` deletes one
once the audit sink has it. ``claim_audit`` hands the oldest to one forwarder at a time across
the processes on the file: the claim is an exclusive ``flock`` on ``<database>-outbox-lock``
beside it, taken without waiting (held: another process is forwarding) and released by the
kernel with a process that dies. Not an SQLite transaction: one held across the audit sink's
call would keep every writer out of the file meanwhile, the audit log on the same file
included.

It is also the ``StoreStateTable`` of the processes on the file: each tenant's document store
lifecycle state, kept across restarts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from esra.core.exceptions import ConfigurationError
from esra.sqlite._audit_outbox import OutboxClaim
from esra.sqlite._config_schema import apply_config_schema
from esra.sqlite._dedicated_connection import DedicatedConnection

__all__ = ["SqliteConfigStore"]


def _ts(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _json(document: dict[str, Any]) -> str:
    # Sorted keys: a stored row diffs like an exported file.
    return json.dumps(document, sort_keys=True, ensure_ascii=False)


def _stored(text: str) -> Any:
    """The JSON document a row holds; a row written by hand that is no JSON is refused as
    invalid configuration (what it holds is checked as it is read), never unclassified."""
    try:
        return json.loads(text)
    except ValueError:
        msg = "a stored configuration document is not JSON"
        raise ConfigurationError(msg) from None


def _change(row: sqlite3.Row) -> ConfigChange:
    return ConfigChange(
        tenant_id=row["tenant_id"],
        version=int(row["version"]),
        subject=row["subject"],
        at=datetime.fromisoformat(row["at"]),
        action=row["action"],
        target=row["target"],
        reason=row["reason"],
    )


class SqliteConfigStore:
    """The ``WorkspaceStore`` port over one SQLite file (created if absent).

    All statements run on one dedicated thread over one connection; other handles (in this
    process or another) may open the same file, and ``BEGIN IMMEDIATE`` serialises writers.
    Call ``close()`` when done.
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self._db = DedicatedConnection(
            database, thread_name="esra-config", prepare=apply_config_schema
        )
        # The outbox's claim across processes (a lock file beside the database).
        self._claims = OutboxClaim(self._db, "config_audit_outbox", "outbox-lock")

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    # -- plumbing --------------------------------------------------------------------------

    async def initialize(self) -> int:
        """Open the database and apply the schema (idempotent); return its version."""
        return await self._db.run(apply_config_schema)

    async def close(self) -> None:
        """Close the connection once queued work has finished, and stop the thread."""
        await self._db.close()

    async def ping(self) -> None:
        """Read the database file (for the host's readiness check); raises if it cannot."""
        await self._db.ping()

    # -- the port --------------------------------------------------------------------------

    async def load(self, tenant_id: str) -> AdminWorkspace | None:
        """The tenant's current workspace, or ``None`` before its first save."""

        def query(connection: sqlite3.Connection) -> str | None:
            row = connection.execute(
                "SELECT document FROM config_workspaces WHERE tenant_id = ?", (tenant_id,)
            ).fetchone()
            return str(row["document"]) if row is not None else None

        document = await self._db.run(query)
        return workspace_from_document(_stored(document)) if document is not None else None

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
        document = _json(workspace_document(workspace))
        published = workspace.published_version == workspace.version
        snapshot = _json(dump_snapshot(workspace.snapshot)) if published else None
        tenant, version, at = workspace.tenant_id, workspace.version, _ts(change.at)

        def write(connection: sqlite3.Connection) -> None:
            if expected_version == 0:
                cursor = connection.execute(
                    "INSERT INTO config_workspaces "
                    "(tenant_id, version, published_version, document, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO NOTHING",
                    (tenant, version, workspace.published_version, document, at),
                )
            else:
                cursor = connection.execute(
                    "UPDATE config_workspaces SET version = ?, published_version = ?, "
                    "document = ?, updated_at = ? WHERE tenant_id = ? AND version = ?",
                    (
                        version,
                        workspace.published_version,
                        document,
                        at,
                        tenant,
                        expected_version,
                    ),
                )
            if cursor.rowcount != 1:
                row = connection.execute(
                    "SELECT version FROM config_workspaces WHERE tenant_id = ?", (tenant,)
                ).fetchone()
                current = int(row["version"]) if row is not None else None
                raise ConfigConflictError(tenant, expected=expected_version, current=current)
            connection.execute(
                "INSERT INTO config_changes "
                "(tenant_id, version, subject, at, action, target, reason, document) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tenant,
                    version,
                    change.subject,
                    at,
                    change.action,
                    change.target,
                    change.reason,
                    document,
                ),
            )
            if snapshot is not None:
                connection.execute(
                    "INSERT INTO config_published (tenant_id, version, snapshot, "
                    "published_at) VALUES (?, ?, ?, ?)",
                    (tenant, version, snapshot, at),
                )
            if audit is not None:
                _hold(connection, audit)

        await self._db.write(write)

    async def pending_audit(self) -> list[AuditRecord]:
        """Every held audit record, every tenant's, in the order they were saved (rows set
        aside, or this version cannot decode, left out)."""
        return await self._db.run(self._claims.pending)

    async def settle_audit(self, correlation_id: str) -> None:
        """Delete the held record with ``correlation_id`` (the audit sink has it)."""

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM config_audit_outbox WHERE correlation_id = ?", (correlation_id,)
            )

        await self._db.write(write)

    def claim_audit(self) -> AbstractAsyncContextManager[AuditRecord | None]:
        """The oldest held record while the block runs, deleted when it completes (``None``:
        nothing held, or another process or handle is forwarding)."""
        return self._claims.claim()

    async def history(self, tenant_id: str) -> list[ConfigChange]:
        """Every change saved for the tenant, oldest first."""

        def query(connection: sqlite3.Connection) -> list[ConfigChange]:
            rows = connection.execute(
                "SELECT tenant_id, version, subject, at, action, target, reason "
                "FROM config_changes WHERE tenant_id = ? ORDER BY version",
                (tenant_id,),
            ).fetchall()
            return [_change(row) for row in rows]

        return await self._db.run(query)

    async def workspace_at(self, tenant_id: str, version: int) -> AdminWorkspace | None:
        """The workspace as it was saved at ``version``, if that version exists."""

        def query(connection: sqlite3.Connection) -> str | None:
            row = connection.execute(
                "SELECT document FROM config_changes WHERE tenant_id = ? AND version = ?",
                (tenant_id, version),
            ).fetchone()
            return str(row["document"]) if row is not None else None

        document = await self._db.run(query)
        return workspace_from_document(_stored(document)) if document is not None else None

    async def published(self, tenant_id: str) -> ConfigSnapshot | None:
        """The tenant's latest publication, or ``None`` if it never published."""
        return await self._published(
            "SELECT snapshot FROM config_published WHERE tenant_id = ? "
            "ORDER BY version DESC LIMIT 1",
            (tenant_id,),
        )

    async def published_at(self, tenant_id: str, version: int) -> ConfigSnapshot | None:
        """The snapshot published at workspace ``version``."""
        return await self._published(
            "SELECT snapshot FROM config_published WHERE tenant_id = ? AND version = ?",
            (tenant_id, version),
        )

    async def _published(self, statement: str, params: tuple[Any, ...]) -> ConfigSnapshot | None:
        def query(connection: sqlite3.Connection) -> str | None:
            row = connection.execute(statement, params).fetchone()
            return str(row["snapshot"]) if row is not None else None

        text = await self._db.run(query)
        return load_snapshot(_stored(text)) if text is not None else None

    # -- the document stores' shared lifecycle state (``StoreStateTable``) -------------------

    async def read_store_state(self, tenant_id: str) -> StoreState | None:
        """The tenant's store state as the last administrative action set it."""

        def query(connection: sqlite3.Connection) -> sqlite3.Row | None:
            row: sqlite3.Row | None = connection.execute(
                "SELECT status, changed_at, failure, remedy FROM config_store_states"
                " WHERE tenant_id = ?",
                (tenant_id,),
            ).fetchone()
            return row

        row = await self._db.run(query)
        if row is None:
            return None
        return StoreState(
            status=StoreStatus(row["status"]),
            changed_at=datetime.fromisoformat(row["changed_at"]),
            failure=row["failure"],
            remedy=row["remedy"],
        )

    async def write_store_state(
        self, tenant_id: str, state: StoreState, *, audit: AuditRecord | None = None
    ) -> None:
        """Record ``state`` as the tenant's store state, holding ``audit`` in the outbox in
        the same transaction."""
        values = (tenant_id, state.status.value, _ts(state.changed_at), state.failure, state.remedy)

        def write(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT INTO config_store_states (tenant_id, status, changed_at, failure, remedy)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET"
                " status = excluded.status, changed_at = excluded.changed_at,"
                " failure = excluded.failure, remedy = excluded.remedy",
                values,
            )
            if audit is not None:
                _hold(connection, audit)

        await self._db.write(write)

    async def replace_store_state(
        self, tenant_id: str, expected: StoreState, state: StoreState, *, audit: AuditRecord
    ) -> bool:
        """``write_store_state`` if the tenant's state still has ``expected``'s status and
        ``changed_at`` (one ``BEGIN IMMEDIATE`` transaction: one writer at a time)."""
        values = (state.status.value, _ts(state.changed_at), state.failure, state.remedy)
        where = (tenant_id, expected.status.value, _ts(expected.changed_at))

        def replace(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(
                "UPDATE config_store_states SET status = ?, changed_at = ?, failure = ?,"
                " remedy = ? WHERE tenant_id = ? AND status = ? AND changed_at = ?",
                (*values, *where),
            )
            if cursor.rowcount != 1:
                return False
            _hold(connection, audit)
            return True

        return await self._db.write(replace)

    async def published_versions(self) -> dict[str, int]:
        """Each tenant's latest published version (one indexed aggregate)."""

        def query(connection: sqlite3.Connection) -> dict[str, int]:
            rows = connection.execute(
                "SELECT tenant_id, max(version) AS version FROM config_published GROUP BY tenant_id"
            ).fetchall()
            return {str(row["tenant_id"]): int(row["version"]) for row in rows}

        return await self._db.run(query)


def _hold(connection: sqlite3.Connection, audit: AuditRecord) -> None:
    """Insert ``audit`` into the outbox, in the transaction ``connection`` is in."""
    connection.execute(
        "INSERT INTO config_audit_outbox (correlation_id, record) VALUES (?, ?)",
        (audit.correlation_id, _json(record_document(audit))),
    )
