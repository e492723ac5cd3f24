"""The claim of an audit outbox table in PostgreSQL: one forwarder at a time, across hosts.

Both outboxes on PostgreSQL — the configuration store's and each document store's — hold
audit records in a table ``(seq, record jsonb, ...)`` until the audit sink has them
(``esra.core.admin.AuditOutbox``). ``claim_held_record`` is their ``claim_audit``: one
transaction takes the transaction-scoped advisory lock named ``lock`` without waiting (held:
another host is forwarding), reads the oldest record, stays open while the sink is handed it
and deletes it before committing. The server releases the lock at commit, at rollback and
when the session ends, so a host killed, or whose connection died, mid-forward keeps no one
out. Transaction-scoped rather than a session lock, so the claim holds behind a
transaction-pooling PgBouncer too. When nothing is held a claim is one ``SELECT EXISTS``.

A held row this version cannot decode costs only itself (``esra.core.audit.read_held_row``):
it is reported and set aside, or, a newer ESRA's record, passed over; either way the claim
goes on to the next row.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from psycopg import sql

from esra.core.audit import SET_ASIDE_PREFIX, AuditRecord, HeldRow, read_held_row
from esra.postgres._pool import Pool

__all__ = ["claim_held_record", "held_records"]

# Rows set aside (``esra.core.audit.read_held_row``) are kept but never handed out again.
_SET_ASIDE_PATTERN = f"{SET_ASIDE_PREFIX}%"

# The rows a claim may hand out, after a row id: those not set aside, oldest first.
_NEXT = (
    "SELECT seq, record, record::text FROM {o} WHERE seq > %(after)s"
    " AND correlation_id NOT LIKE %(aside)s ORDER BY seq"
)


def _held_row(outbox: str, seq: int, document: object, text: str) -> HeldRow | None:
    """``read_held_row`` of a ``jsonb`` row; the digest is of the text the server gives it."""
    return read_held_row(outbox, seq, document, text.encode("utf-8", "surrogatepass"))


async def held_records(pool: Pool, outbox: sql.Composable, name: str) -> list[AuditRecord]:
    """Every held record of ``outbox`` (named ``name``) this version can decode, in order
    (for ``pending_audit``)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            sql.SQL(_NEXT).format(o=outbox), {"after": 0, "aside": _SET_ASIDE_PATTERN}
        )
        rows = await cursor.fetchall()
    held = (_held_row(name, int(row[0]), row[1], str(row[2])) for row in rows)
    return [found.record for found in held if found is not None and found.delivered]


@contextlib.asynccontextmanager
async def claim_held_record(
    pool: Pool, outbox: sql.Composable, lock: str
) -> AsyncIterator[AuditRecord | None]:
    """The oldest record of ``outbox`` while the block runs, deleted when it completes and
    kept when it raises (``None``: nothing held, or the advisory lock ``lock`` is held by
    another host or handle, which is forwarding). A row that does not decode is reported
    instead, and set aside when the block completes; ``lock`` names the outbox there."""
    async with pool.connection() as conn:
        # One query when nothing is held; a transaction only when something is.
        cursor = await conn.execute(
            sql.SQL(
                "SELECT EXISTS (SELECT 1 FROM {o} WHERE correlation_id NOT LIKE %(aside)s)"
            ).format(o=outbox),
            {"aside": _SET_ASIDE_PATTERN},
        )
        row = await cursor.fetchone()
        if row is None or not row[0]:
            yield None
            return
        async with conn.transaction():
            cursor = await conn.execute(
                "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (lock,)
            )
            locked = await cursor.fetchone()
            handed: tuple[int, HeldRow] | None = None
            after = 0
            while handed is None and locked is not None and locked[0]:
                # Read under the lock (each statement sees what committed before it): the
                # previous holder's record is deleted by now. Newer ESRAs' rows are passed.
                cursor = await conn.execute(
                    sql.SQL(_NEXT + " LIMIT 1").format(o=outbox),
                    {"after": after, "aside": _SET_ASIDE_PATTERN},
                )
                oldest = await cursor.fetchone()
                if oldest is None:
                    break
                after = int(oldest[0])
                found = _held_row(lock, after, oldest[1], str(oldest[2]))
                if found is not None:
                    handed = (after, found)
            if handed is None:
                yield None
                return
            seq, held = handed
            yield held.record
            if held.delivered:
                await conn.execute(
                    sql.SQL("DELETE FROM {o} WHERE seq = %(seq)s").format(o=outbox),
                    {"seq": seq},
                )
            else:
                await conn.execute(
                    sql.SQL(
                        "UPDATE {o} SET correlation_id = %(prefix)s || correlation_id"
                        " WHERE seq = %(seq)s"
                    ).format(o=outbox),
                    {"prefix": SET_ASIDE_PREFIX, "seq": seq},
                )
