"""``immediate_transaction``: the one way ESRA's own SQLite stores write.

Every write (a schema migration, a queue claim, a configuration save, an audit batch, a
retention prune) must be all-or-nothing and must not race another process writing the same
file. ``BEGIN IMMEDIATE`` takes the database's write lock before the first statement, so two
writers queue on the busy timeout instead of both reading, then one failing to upgrade its
lock; any exception (including cancellation) rolls back, so nothing is half-written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["immediate_transaction"]


@contextmanager
def immediate_transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block in one ``BEGIN IMMEDIATE`` transaction: committed, or rolled back if it raises.

    The connection must be in autocommit mode (``isolation_level=None``), so that this is
    the only transaction it ever opens.
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
