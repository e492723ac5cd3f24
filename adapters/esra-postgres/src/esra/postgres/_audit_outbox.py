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
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from psycopg import sql

from esra.core.audit import AuditRecord, record_from_document
from esra.postgres._pool import Pool

__all__ = ["claim_held_record"]


@contextlib.asynccontextmanager
async def claim_held_record(
    pool: Pool, outbox: sql.Composable, lock: str
) -> AsyncIterator[AuditRecord | None]:
    """The oldest record of ``outbox`` while the block runs, deleted when it completes and
    kept when it raises (``None``: nothing held, or the advisory lock ``lock`` is held by
    another host or handle, which is forwarding)."""
    async with pool.connection() as conn:
        # One query when nothing is held; a transaction only when something is.
        cursor = await conn.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {o})").format(o=outbox))
        row = await cursor.fetchone()
        if row is None or not row[0]:
            yield None
            return
        async with conn.transaction():
            cursor = await conn.execute(
                "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (lock,)
            )
            locked = await cursor.fetchone()
            oldest = None
            if locked is not None and locked[0]:
                # Read under the lock (each statement sees what committed before it): the
                # previous holder's record is deleted by now.
                cursor = await conn.execute(
                    sql.SQL("SELECT seq, record FROM {o} ORDER BY seq LIMIT 1").format(o=outbox)
                )
                oldest = await cursor.fetchone()
            if oldest is None:
                yield None
                return
            yield record_from_document(oldest[1])
            await conn.execute(
                sql.SQL("DELETE FROM {o} WHERE seq = %(seq)s").format(o=outbox),
                {"seq": oldest[0]},
            )
