"""How each SQL Server execution is fenced: lock timeout, isolation, a transaction never kept.

SQL Server has no read-only transaction. A provider's read-only guarantee therefore rests on:

1. the login: a user that is only in ``db_datareader`` (no ``db_datawriter``, no DDL rights,
   no ``EXECUTE``), so the server itself refuses any write (error 229/262);
2. the statement: the shared builder emits a single ``SELECT``;
3. the transaction: every statement runs inside ``BEGIN TRANSACTION`` and is always followed
   by ``ROLLBACK`` — so even a write that slipped past 1 and 2 would never persist.

Time limits: ``SET LOCK_TIMEOUT`` (milliseconds, error 1222 when exceeded) bounds waits on
locks server-side, the driver's query timeout (FreeTDS sends an attention to the server,
which aborts the statement) bounds the statement, and the provider's asyncio deadline bounds
the caller's wait. Snapshot isolation, when configured, makes readers never block on writers;
a database without ``ALLOW_SNAPSHOT_ISOLATION ON`` refuses it (error 3952,
``SNAPSHOT_ISOLATION_UNAVAILABLE``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ROLLBACK_SQL", "Isolation", "session_sql"]

ROLLBACK_SQL = "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION"


class Isolation(StrEnum):
    """The isolation levels a provider may run its reads under."""

    READ_COMMITTED = "READ COMMITTED"
    SNAPSHOT = "SNAPSHOT"


def session_sql(*, lock_timeout_ms: int, isolation: Isolation) -> str:
    """Return the batch run before each search: lock timeout, isolation, ``BEGIN TRANSACTION``.

    Both values are typed configuration (an ``int`` and an ``Isolation``), never user text.
    """
    milliseconds = int(lock_timeout_ms)
    if milliseconds < 0:
        msg = "lock_timeout_ms must not be negative"
        raise ValueError(msg)
    level = Isolation(isolation).value
    return (
        f"SET LOCK_TIMEOUT {milliseconds}; "
        f"SET TRANSACTION ISOLATION LEVEL {level}; "
        "BEGIN TRANSACTION"
    )
