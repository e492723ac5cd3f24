"""Run one statement as a server-side prepared statement: values never enter its text.

MySQL's text protocol (``COM_QUERY``) has no parameters: a driver's ``execute(sql, params)``
escapes each value and writes it into the command text, which the server then parses. Here
the text, with a ``?`` where each value goes, is sent alone (``COM_STMT_PREPARE``); the values
follow in the binary ``COM_STMT_EXECUTE`` packet, typed (string, integer, double, date...),
where the server reads them as data and never parses them as SQL. The statement is closed
(``COM_STMT_CLOSE``, no reply) once its rows are read.

This calls mysql-connector-python's connection-level ``cmd_stmt_*`` methods rather than its
prepared cursor: the cursor also sends ``COM_STMT_RESET`` on every execution and pings the
server whenever one is created, three round trips more than the two a statement needs, and
it rewrites ``%s`` and ``%(name)s`` wherever its regular expressions find them, quoted
identifiers included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from mysql.connector import Error
from mysql.connector.connection import MySQLConnection

__all__ = ["fetch_all"]


def fetch_all(
    connection: MySQLConnection, sql: str, values: Sequence[object] = ()
) -> list[tuple[Any, ...]]:
    """Prepare ``sql``, execute it with ``values`` bound to its ``?`` in order, and return
    every row (none for a statement without a result set).

    A failure part-way leaves the result unread on the connection: every later command on
    it fails until the caller rolls it back or drops it, and the statement is freed with
    the session.

    Raises:
        mysql.connector.Error: the server's or the driver's failure.
    """
    prepared: Any = connection.cmd_stmt_prepare(sql.encode("utf-8"))
    statement = int(prepared["statement_id"])
    try:
        result: Any = connection.cmd_stmt_execute(
            statement, data=tuple(values), parameters=prepared["parameters"]
        )
        rows: list[tuple[Any, ...]] = []
        if isinstance(result, tuple):  # column count, columns, EOF: rows follow
            connection.unread_result = True
            rows, _ = connection.get_rows(binary=True, columns=result[1])
    except BaseException:
        # Closing needs an exchange in step; the failure that matters is the one raised.
        with contextlib.suppress(Error):
            connection.cmd_stmt_close(statement)
        raise
    connection.cmd_stmt_close(statement)
    return rows
