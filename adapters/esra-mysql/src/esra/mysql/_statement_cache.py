"""A connection's prepared searches, kept so that a statement run before costs one round trip.

A prepared statement is prepared once (``COM_STMT_PREPARE``: a round trip and the server's
parse) and can then be executed any number of times on its connection with new values. A
search's text depends only on the query's shape and its time limit (which
``esra.mysql._server.reusable_limit_s`` rounds so that it recurs), so the same texts come
back call after call; each connection keeps the statements it prepared, keyed by their text,
the least recently used closed once it holds ``capacity``.

The server counts every session's prepared statements against one global
``max_prepared_stmt_count`` (16,382 by default). Should the server refuse a prepare for that
(error 1461), the connection closes every statement it keeps and prepares again, once: a
search then costs what it did without the cache, never fails for it.

Not thread-safe: a connection, and so its statements, belongs to one slot's thread.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import attrs
from mysql.connector import Error
from mysql.connector.connection import MySQLConnection

from esra.mysql._errors import error_number

__all__ = ["STATEMENTS_PER_CONNECTION", "PreparedStatements"]

# A search's shapes are few (terms, filters and the limit's rounding), and the server-wide
# count is shared by every pooled connection of every host: a small bound keeps the common
# shapes without claiming much of it.
STATEMENTS_PER_CONNECTION = 16

_TOO_MANY_PREPARED = 1461  # ER_MAX_PREPARED_STMT_COUNT_REACHED


@attrs.frozen
class _Prepared:
    """A statement's server-side id and the parameter metadata its execution packet needs."""

    statement_id: int
    parameters: Sequence[Any]


class PreparedStatements:
    """The statements prepared on one connection, least recently used first.

    Args:
        connection: the connection they are prepared on (its slot's thread uses it).
        capacity: the most statements kept; a new one past it closes the oldest.
    """

    def __init__(
        self, connection: MySQLConnection, capacity: int = STATEMENTS_PER_CONNECTION
    ) -> None:
        if capacity < 1:
            msg = "the cache needs room for at least one statement"
            raise ValueError(msg)
        self.connection = connection
        self._capacity = capacity
        self._statements: OrderedDict[str, _Prepared] = OrderedDict()

    def __len__(self) -> int:
        return len(self._statements)

    def fetch_all(self, sql: str, values: Sequence[object]) -> list[tuple[Any, ...]]:
        """Execute ``sql`` with ``values`` bound to its ``?`` in order, preparing it first
        unless this connection already has; return every row.

        A failure part-way forgets the statement (and closes it if the exchange allows):
        the next execution of the same text prepares afresh rather than trust a statement
        whose last use did not end cleanly.

        Raises:
            mysql.connector.Error: the server's or the driver's failure.
        """
        prepared = self._statements.pop(sql, None) or self._prepare(sql)
        try:
            result: Any = self.connection.cmd_stmt_execute(
                prepared.statement_id, data=tuple(values), parameters=prepared.parameters
            )
            rows: list[tuple[Any, ...]] = []
            if isinstance(result, tuple):  # column count, columns, EOF: rows follow
                self.connection.unread_result = True
                rows, _ = self.connection.get_rows(binary=True, columns=result[1])
        except BaseException:
            self._close(prepared)
            raise
        self._statements[sql] = prepared  # most recently used last
        return rows

    def close(self) -> None:
        """Close the connection; the server frees its statements with the session."""
        self._statements.clear()
        self.connection.close()

    def close_all(self) -> None:
        """Close every statement this connection keeps (each close has no reply)."""
        while self._statements:
            _, prepared = self._statements.popitem(last=False)
            self._close(prepared)

    def _prepare(self, sql: str) -> _Prepared:
        try:
            answer: Any = self.connection.cmd_stmt_prepare(sql.encode("utf-8"))
        except Error as exc:
            if error_number(exc) != _TOO_MANY_PREPARED or not self._statements:
                raise
            self.close_all()
            answer = self.connection.cmd_stmt_prepare(sql.encode("utf-8"))
        while len(self._statements) >= self._capacity:
            _, oldest = self._statements.popitem(last=False)
            self._close(oldest)
        return _Prepared(int(answer["statement_id"]), answer["parameters"])

    def _close(self, prepared: _Prepared) -> None:
        # Closing needs an exchange in step; a failure that matters is raised elsewhere.
        with contextlib.suppress(Error):
            self.connection.cmd_stmt_close(prepared.statement_id)
