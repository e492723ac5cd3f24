"""A recording stand-in for ``pymssql._mssql.MSSQLConnection`` (no SQL Server runs here).

It implements exactly the members the provider calls — ``query_timeout``,
``execute_non_query``, ``init_procedure``, ``get_iterator`` and the stored procedure's
``bind`` / ``execute`` — and records every call in order. ``test_rpc`` checks each of these
names exists on the real ``_mssql`` classes, so the fake cannot drift from the driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs

__all__ = ["Bind", "FakeConnection", "FakeMssql", "FakeProcedure"]


@attrs.frozen
class Bind:
    """One ``MSSQLStoredProcedure.bind`` call."""

    name: str
    value: object
    dbtype: int
    null: bool


class FakeProcedure:
    """Records ``bind`` calls; ``execute`` runs the connection's scripted outcome."""

    def __init__(self, connection: FakeMssql, name: str) -> None:
        self.connection = connection
        self.name = name
        self.binds: list[Bind] = []

    def bind(
        self,
        value: object,
        dbtype: int,
        param_name: str | None = None,
        *,
        output: bool = False,
        null: bool = False,
        max_length: int = -1,
    ) -> None:
        """Record the parameter (the provider binds input parameters by name only)."""
        assert param_name is not None
        assert output is False
        assert max_length == -1
        self.binds.append(Bind(param_name, value, dbtype, null))

    def execute(self) -> int:
        """Record the call; raise the scripted error, if any."""
        self.connection.calls.append(("rpc", self))
        if self.connection.fail_execute is not None:
            raise self.connection.fail_execute
        return 0


class FakeMssql:
    """The ``_mssql`` connection: batches and RPCs recorded, rows scripted."""

    def __init__(self, rows: Sequence[tuple[Any, ...]] = ()) -> None:
        self.rows = list(rows)
        self.calls: list[tuple[str, Any]] = []
        self.procedures: list[FakeProcedure] = []
        self.fail_execute: BaseException | None = None
        self.fail_batch: dict[str, BaseException] = {}
        self._query_timeout = 0

    @property
    def query_timeout(self) -> int:
        """The per-statement timeout in seconds, as last set."""
        return self._query_timeout

    @query_timeout.setter
    def query_timeout(self, value: int) -> None:
        self.calls.append(("query_timeout", value))
        self._query_timeout = value

    def execute_non_query(self, query_string: str, params: object = None) -> None:
        """Record a batch; the provider never passes parameters here."""
        assert params is None
        self.calls.append(("batch", query_string))
        failure = self.fail_batch.get(query_string)
        if failure is not None:
            raise failure

    def init_procedure(self, procname: str) -> FakeProcedure:
        """Start recording an RPC."""
        proc = FakeProcedure(self, procname)
        self.procedures.append(proc)
        return proc

    def get_iterator(self, row_format: int) -> Iterator[tuple[Any, ...]]:
        """The scripted rows of the last RPC."""
        self.calls.append(("rows", row_format))
        return iter(self.rows)

    def batches(self) -> list[str]:
        """Every batch text sent, in order."""
        return [sql for kind, sql in self.calls if kind == "batch"]


class FakeConnection:
    """The ``pymssql.Connection`` the pool holds: the provider only reaches ``_conn``."""

    def __init__(self, mssql: FakeMssql) -> None:
        self._conn = mssql
        self.closed = False

    def close(self) -> None:
        """Called by the pool when the slot is discarded or the provider closes."""
        self.closed = True
