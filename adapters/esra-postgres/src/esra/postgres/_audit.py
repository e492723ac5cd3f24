"""PostgresAuditLog: the audit log in PostgreSQL (psycopg 3), appended in batches, read back.

The backend of ``esra.core.audit.BatchingAuditSink`` — ``write_batch`` is one
multi-row ``INSERT … SELECT FROM unnest(…)`` with the columns bound as binary arrays: one
statement and one round trip per batch, all rows or none — and an
``esra.core.audit.AuditReader``: ``query`` reads one tenant newest first, keyset-paged
on ``(at, seq)`` over the ``(tenant_id, at DESC, seq DESC)`` index; ``WHERE tenant_id = …``
is in every statement.

Connect it as the host's role (``grant_audit_writer``): it needs only ``INSERT`` and
``SELECT``. ``prune_before`` (retention) is for the owner's connection.

Text that PostgreSQL cannot hold (NUL, lone surrogates) is replaced by U+FFFD before it is
bound, and a float ``jsonb`` cannot hold (NaN, an infinity) becomes the text Python's
``json`` writes for it (``"NaN"``, ``"Infinity"``), so a hostile value in a dimension can
never make a batch unwritable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Self

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from esra.core.audit import (
    AuditDimension,
    AuditPage,
    AuditQuery,
    AuditRecord,
    audit_subject,
    audit_text,
    dimensions_from_json,
    page_of,
)
from esra.core.codes import AuditEvent
from esra.postgres._audit_schema import DEFAULT_AUDIT_SCHEMA
from esra.postgres._connection import scrub
from esra.postgres._pool import Pool, open_pool, ping_pool

__all__ = ["PostgresAuditLog", "prune_audit_before"]


def _text(value: str) -> str:
    # Each lone surrogate one U+FFFD, as the codec replaces them (a record forwarded from an
    # outbox arrives so), then NUL, which PostgreSQL text cannot hold.
    return str(scrub(audit_text(value)))


def _optional(value: str | None) -> str | None:
    return None if value is None else _text(value)


def _dimension(value: AuditDimension) -> AuditDimension:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, tuple):
        return tuple(_text(item) for item in value)
    if isinstance(value, float) and not math.isfinite(value):
        # json.dumps writes the bare token, which jsonb refuses (the whole batch with it).
        return json.dumps(value)
    return value


def _dimensions(record: AuditRecord) -> str:
    clean = {_text(name): _dimension(value) for name, value in record.dimensions.items()}
    return json.dumps(clean, sort_keys=True, separators=(",", ":"))


def _columns(records: Sequence[AuditRecord]) -> list[list[Any]]:
    """``records`` as the eight arrays the statements bind, one per column."""
    columns: list[list[Any]] = [[] for _ in range(8)]
    for record in records:
        for column, value in zip(
            columns,
            (
                _text(record.tenant_id),
                record.at,
                record.event.value,
                _text(record.correlation_id),
                _optional(audit_subject(record)),
                _text(record.outcome),
                _optional(record.reason),
                _dimensions(record),
            ),
            strict=True,
        ):
            column.append(value)
    return columns


class PostgresAuditLog:
    """Audit records in ``schema.records``.

    Args:
        pool: an open pool of autocommit connections (as the host's role).
        schema: the audit schema (``apply_audit_schema`` created it).

    ``open(...)`` builds one with its own pool; ``close()`` closes a pool it owns.
    """

    def __init__(self, pool: Pool, *, schema: str = DEFAULT_AUDIT_SCHEMA) -> None:
        self._pool = pool
        self._owns_pool = False
        self._records = sql.Identifier(schema, "records")
        # %b: the arrays go in PostgreSQL's binary format. In text format psycopg escapes
        # every quote of every JSON document with a regular expression, on the event loop —
        # most of a batch's CPU time, and what a call waiting for its audit records pays.
        batch = sql.SQL(
            "unnest(%b::text[], %b::timestamptz[], %b::text[], %b::text[], %b::text[],"
            " %b::text[], %b::text[], %b::text[]) AS u (t, a, e, c, s, o, x, d)"
        )
        self._insert = sql.SQL(
            "INSERT INTO {r} (tenant_id, at, event, correlation_id, subject, outcome, reason,"
            " dimensions) SELECT t, a, e, c, s, o, x, d::jsonb FROM {batch}"
        ).format(r=self._records, batch=batch)
        # A batch's records that are stored as given; found by the (tenant_id, correlation_id)
        # index, so asking costs one probe per record.
        self._count_stored = sql.SQL(
            "SELECT count(*) FROM {batch} WHERE EXISTS (SELECT 1 FROM {r} AS r"
            " WHERE r.tenant_id = u.t AND r.correlation_id = u.c AND r.at = u.a"
            " AND r.event = u.e AND r.outcome = u.o AND r.subject IS NOT DISTINCT FROM u.s"
            " AND r.reason IS NOT DISTINCT FROM u.x AND r.dimensions = u.d::jsonb)"
        ).format(r=self._records, batch=batch)
        self._unanswered: list[list[Any]] | None = None

    @classmethod
    async def open(
        cls,
        conninfo: str = "",
        *,
        kwargs: Mapping[str, Any] | None = None,
        schema: str = DEFAULT_AUDIT_SCHEMA,
        min_size: int = 1,
        max_size: int = 2,
    ) -> Self:
        """Open a pool (``conninfo`` and/or ``kwargs``) and wrap it."""
        pool = await open_pool(
            conninfo, kwargs=kwargs, name="esra-audit", min_size=min_size, max_size=max_size
        )
        log = cls(pool, schema=schema)
        log._owns_pool = True
        return log

    async def close(self) -> None:
        """Close the pool if this log opened it."""
        if self._owns_pool:
            await self._pool.close()

    async def ping(self) -> None:
        """``SELECT 1`` on the pool (for the host's readiness check); raises if it cannot."""
        await ping_pool(self._pool)

    async def write_batch(self, records: Sequence[AuditRecord]) -> None:
        """Append ``records`` in one statement (all or none), once.

        A statement whose connection failed may have been committed all the same: the server
        commits an autocommit statement before its answer, which is then lost with the
        connection. The sink writes such a batch again, so the same batch is looked for
        before it is inserted again, and not inserted if every record of it is stored.
        """
        if not records:
            return
        columns = _columns(records)
        # Looking may fail too (the connection is still down): the batch then stays unanswered.
        if self._unanswered == columns and await self._stored(columns):
            self._unanswered = None
            return
        try:
            async with self._pool.connection() as conn:
                await conn.execute(self._insert, columns)
        except psycopg.OperationalError:
            # The connection failed, not the statement: whether it was committed is unknown.
            self._unanswered = columns
            raise
        self._unanswered = None

    async def _stored(self, columns: list[list[Any]]) -> bool:
        """Whether every record of a batch (its ``_columns``) is stored as written."""
        async with self._pool.connection() as conn:
            cursor = await conn.execute(self._count_stored, columns)
            row = await cursor.fetchone()
        return row is not None and row[0] == len(columns[0])

    async def query(self, query: AuditQuery) -> AuditPage:
        """The page of ``query``: the tenant's matching records, newest first."""
        clauses = [sql.SQL("tenant_id = %(tenant)s")]
        params: dict[str, Any] = {"tenant": _text(query.tenant_id), "limit": query.limit + 1}
        if query.events:
            clauses.append(sql.SQL("event = ANY(%(events)s::text[])"))
            params["events"] = sorted(e.value for e in query.events)
        if query.subject is not None:
            clauses.append(sql.SQL("subject = %(subject)s"))
            params["subject"] = _text(query.subject)
        if query.correlation_id is not None:
            clauses.append(sql.SQL("correlation_id = %(correlation)s"))
            params["correlation"] = _text(query.correlation_id)
        if query.since is not None:
            clauses.append(sql.SQL("at >= %(since)s"))
            params["since"] = query.since
        if query.until is not None:
            clauses.append(sql.SQL("at < %(until)s"))
            params["until"] = query.until
        if query.cursor is not None:
            clauses.append(sql.SQL("(at, seq) < (%(cursor_at)s, %(cursor_seq)s)"))
            params["cursor_at"] = query.cursor.at
            params["cursor_seq"] = query.cursor.seq
        statement = sql.SQL(
            "SELECT seq, tenant_id, at, event, correlation_id, outcome, reason, dimensions"
            " FROM {r} WHERE {where} ORDER BY at DESC, seq DESC LIMIT %(limit)s"
        ).format(r=self._records, where=sql.SQL(" AND ").join(clauses))
        async with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(statement, params)
            rows = await cur.fetchall()
        entries = [(_record(row), int(row["seq"])) for row in rows]
        return page_of(entries, query.limit)


def _record(row: Mapping[str, Any]) -> AuditRecord:
    return AuditRecord(
        event=AuditEvent(row["event"]),
        tenant_id=row["tenant_id"],
        correlation_id=row["correlation_id"],
        at=row["at"],
        outcome=row["outcome"],
        reason=row["reason"],
        dimensions=dimensions_from_json(row["dimensions"]),
    )


async def prune_audit_before(
    connection: psycopg.AsyncConnection[Any],
    cutoff: datetime,
    schema: str = DEFAULT_AUDIT_SCHEMA,
) -> int:
    """Retention: delete every tenant's records stamped before ``cutoff``; return how many.

    Calls ``schema.prune_before`` — run it on the owner's (maintenance) connection; the
    host's role may not execute it and may not delete.

    Raises:
        ValueError: ``cutoff`` is naive.
        psycopg.errors.InsufficientPrivilege: the connection's role may not prune.
    """
    if cutoff.tzinfo is None:
        msg = "the retention cutoff must be timezone-aware"
        raise ValueError(msg)
    cursor = await connection.execute(
        sql.SQL("SELECT {}(%s)").format(sql.Identifier(schema, "prune_before")), (cutoff,)
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0
