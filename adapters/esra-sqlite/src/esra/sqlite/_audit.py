"""SqliteAuditLog: the audit log on one SQLite file — the embedded default's durable audit.

The backend of ``esra.core.audit.BatchingAuditSink`` (``write_batch``: one
``BEGIN IMMEDIATE`` transaction per batch, all rows or none) and an
``esra.core.audit.AuditReader`` (``query``: newest first, keyset paged on
``(at, seq)``, the tenant in every statement). WAL journal with ``synchronous = FULL``, so a
committed batch survives a power cut, not only a killed process.

Times are stored as UTC ISO-8601 text with microseconds, which sorts in time order. Every
value is a bound parameter; the statement text is assembled from this module's constants.

Text UTF-8 cannot carry (a lone surrogate, from a token's ``sub`` or a command line's
undecodable bytes) is replaced by U+FFFD before it is bound, in records and in filters
alike, so a hostile value can never make a batch unwritable.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from esra.core.audit import (
    AuditPage,
    AuditQuery,
    AuditRecord,
    audit_subject,
    audit_text,
    dimensions_from_json,
    dimensions_json,
    page_of,
)
from esra.core.codes import AuditEvent
from esra.sqlite._audit_schema import apply_audit_schema
from esra.sqlite._dedicated_connection import DedicatedConnection

__all__ = ["SqliteAuditLog"]

_INSERT = (
    "INSERT INTO audit_records (tenant_id, at, event, correlation_id, subject, outcome, "
    "reason, dimensions) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT = (
    "SELECT seq, tenant_id, at, event, correlation_id, outcome, reason, dimensions "
    "FROM audit_records WHERE tenant_id = ?"
)


def _ts(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def _text(value: str | None) -> str | None:
    # sqlite3 encodes every bound str as UTF-8 and refuses the whole statement for one lone
    # surrogate; the sink would then retry that batch for ever, holding every record behind
    # it. Replaced one for one, as the codec replaces them in the dimensions, so the subject
    # column and the subject dimension a reviewer is shown stay the same text.
    return None if value is None else audit_text(value)


def _row(record: AuditRecord) -> tuple[object, ...]:
    return (
        _text(record.tenant_id),
        _ts(record.at),
        record.event.value,
        _text(record.correlation_id),
        _text(audit_subject(record)),
        _text(record.outcome),
        _text(record.reason),
        dimensions_json(record),
    )


def _record(row: sqlite3.Row) -> AuditRecord:
    return AuditRecord(
        event=AuditEvent(row["event"]),
        tenant_id=row["tenant_id"],
        correlation_id=row["correlation_id"],
        at=datetime.fromisoformat(row["at"]),
        outcome=row["outcome"],
        reason=row["reason"],
        dimensions=dimensions_from_json(row["dimensions"]),
    )


def _select(query: AuditQuery) -> tuple[str, list[object]]:
    clauses: list[str] = [_SELECT]
    params: list[object] = [_text(query.tenant_id)]
    if query.events:
        events = sorted(e.value for e in query.events)
        clauses.append(f"AND event IN ({', '.join('?' for _ in events)})")
        params.extend(events)
    if query.subject is not None:
        clauses.append("AND subject = ?")
        params.append(_text(query.subject))
    if query.correlation_id is not None:
        clauses.append("AND correlation_id = ?")
        params.append(_text(query.correlation_id))
    if query.since is not None:
        clauses.append("AND at >= ?")
        params.append(_ts(query.since))
    if query.until is not None:
        clauses.append("AND at < ?")
        params.append(_ts(query.until))
    if query.cursor is not None:
        at = _ts(query.cursor.at)
        clauses.append("AND (at < ? OR (at = ? AND seq < ?))")
        params.extend([at, at, query.cursor.seq])
    clauses.append("ORDER BY at DESC, seq DESC LIMIT ?")
    params.append(query.limit + 1)
    return " ".join(clauses), params


class SqliteAuditLog:
    """The audit log in ``database`` (created if absent; may be the data directory's file).

    Call ``initialize()`` once (it applies the audit schema idempotently) and ``close()``
    when done. Statements run on one dedicated thread over one connection; other processes
    may open the same file, and ``BEGIN IMMEDIATE`` serialises writers.
    """

    def __init__(self, database: str | os.PathLike[str]) -> None:
        self._db = DedicatedConnection(
            database, thread_name="esra-audit", pragmas=("PRAGMA synchronous = FULL",)
        )

    @property
    def path(self) -> Path:
        """The database file."""
        return self._db.path

    async def initialize(self) -> int:
        """Apply the audit schema (idempotent); return the version now recorded."""
        return await self._db.run(apply_audit_schema)

    async def close(self) -> None:
        """Close the connection once queued work has finished, and stop the thread."""
        await self._db.close()

    async def ping(self) -> None:
        """Read the database file (for the host's readiness check); raises if it cannot."""
        await self._db.ping()

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Append ``records`` in one transaction."""
        rows = [_row(record) for record in records]

        def insert(connection: sqlite3.Connection) -> None:
            connection.executemany(_INSERT, rows)

        if rows:
            await self._db.write(insert)

    async def query(self, query: AuditQuery) -> AuditPage:
        """The page of ``query``: the tenant's matching records, newest first."""
        statement, params = _select(query)

        def read(connection: sqlite3.Connection) -> list[tuple[AuditRecord, int]]:
            rows = connection.execute(statement, params).fetchall()
            return [(_record(row), int(row["seq"])) for row in rows]

        return page_of(await self._db.run(read), query.limit)

    async def prune_before(self, cutoff: datetime) -> int:
        """Retention: delete every tenant's records stamped before ``cutoff``; return how many.

        Records the cutoff in ``audit_retention`` first — the delete trigger refuses any row
        at or after the latest cutoff — so nothing newer can be removed this way.

        Raises:
            ValueError: ``cutoff`` is naive.
        """
        if cutoff.tzinfo is None:
            msg = "the retention cutoff must be timezone-aware"
            raise ValueError(msg)
        stamp = _ts(cutoff)

        def prune(connection: sqlite3.Connection) -> int:
            connection.execute(
                "INSERT INTO audit_retention (cutoff, applied_at) VALUES (?, ?)",
                (stamp, _ts(datetime.now(UTC))),
            )
            return int(
                connection.execute("DELETE FROM audit_records WHERE at < ?", (stamp,)).rowcount
            )

        return await self._db.write(prune)
