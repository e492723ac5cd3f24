"""How each SQL Server execution is fenced: lock timeout, isolation, a transaction never kept.

T-SQL has no ``SET TRANSACTION READ ONLY`` and no session-level read-only switch, so the
server cannot be told "this transaction may not write". A provider's read-only guarantee
therefore rests on what the server *can* enforce, plus two fences of its own:

1. the login (enforced by the server): a user that is only in ``db_datareader`` (no
   ``db_datawriter``, no DDL rights, no ``EXECUTE`` on user objects), so any write is refused
   (error 229/262). ``sp_executesql`` needs no grant (``public`` may run it) and runs the
   statement with the caller's own permissions;
2. the statement: the shared builder emits a single ``SELECT``, sent as ``sp_executesql``'s
   ``@stmt`` with every value a separate RPC parameter (``esra.sqlserver._rpc``);
3. the transaction: every statement runs inside ``BEGIN TRANSACTION`` and is always followed
   by ``ROLLBACK`` — so even a write that slipped past 1 and 2 would never persist.

``application_intent=readonly`` (``ApplicationIntent=ReadOnly``) routes the connection to a
readable secondary of an Always On availability group, where the database itself is
read-only (error 3906); against a standalone server or a primary it changes nothing, so it is
a routing choice, not a fence. A database set ``READ_ONLY`` by its owner refuses writes too.

Time limits: ``SET LOCK_TIMEOUT`` (milliseconds, error 1222 when exceeded; by default the
execution's timeout) bounds waits on locks server-side, the driver's query timeout (FreeTDS
sends an attention to the server, which aborts the statement) bounds the statement, and the
provider's asyncio deadline bounds the caller's wait. Snapshot isolation, when configured,
makes readers never block on writers; a database without ``ALLOW_SNAPSHOT_ISOLATION ON``
refuses it (error 3952, ``SNAPSHOT_ISOLATION_UNAVAILABLE``).

There is no search path either: an unqualified name resolves in the user's
``DEFAULT_SCHEMA``, then ``dbo``. A mapping's ``schema`` makes the dialect qualify every
relation (``[sales].[articles]``), which no session setting can redirect.
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
