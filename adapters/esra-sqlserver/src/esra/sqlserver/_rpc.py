"""Run a statement as an ``sp_executesql`` RPC: command text and values travel apart.

pymssql's DB-API ``cursor.execute(sql, params)`` substitutes values into the command text on
the client (each one an escaped ``N'...'`` literal). This module instead calls
``sp_executesql`` through ``_mssql``'s RPC interface (FreeTDS ``dbrpcinit`` /
``dbrpcparam`` / ``dbrpcsend``)::

    proc = conn.init_procedure("sp_executesql")
    proc.bind(statement, SQLVARCHAR, "@stmt")    # SELECT ... WHERE b.x = @f0_0 ...
    proc.bind(definition, SQLVARCHAR, "@params")  # @f0_0 nvarchar(4000), @lim bigint, ...
    proc.bind(value, dbtype, "@f0_0")            # one RPC parameter per value
    proc.execute()

Each value is a separate RPC parameter in the TDS packet; the server never parses it as
T-SQL. The statement is the builder's ``pyformat`` text with every ``%(name)s`` rewritten to
``@name`` (and ``%%`` back to ``%``), so it depends on the query's shape only. The parameter
definition is derived from each value's *Python type* (never its content or magnitude): for
one shape both strings are byte-identical whatever the values are.

FreeTDS facts this relies on (``dbrpcparam``): on TDS 7+ a ``SQLVARCHAR`` parameter is sent as
``NVARCHAR`` (converted from the connection's UTF-8), which ``sp_executesql`` requires for
``@stmt`` and ``@params``; its length has a two-byte prefix, so one character parameter holds
at most 8,000 bytes of UTF-16 — 4,000 code units. Longer values would be cut by the driver,
and a cut statement could lose a trailing predicate, so anything longer is refused here
(``RpcLimitError``) before a byte is sent. A zero-length character value is sent as NULL by
dblib (its NULL convention), so ``= ''`` matches nothing: a comparison with NULL only ever
narrows a result. NUL ends a C string in the driver, so ``bindable`` replaces it first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, Final

import attrs
from pymssql import _mssql

from esra.sql import utf8_bindable

__all__ = [
    "MAX_NVARCHAR_UNITS",
    "PROCEDURE",
    "RpcLimitError",
    "RpcParameter",
    "RpcStatement",
    "bindable",
    "compose_rpc",
    "execute_rpc",
    "rpc_statement",
    "rpc_text",
    "utf16_units",
]

PROCEDURE: Final = "sp_executesql"
# An RPC NVARCHAR value has a 2-byte length prefix: 8,000 bytes of UTF-16.
MAX_NVARCHAR_UNITS: Final = 4000
_BIGINT = (-(2**63), 2**63 - 1)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A pyformat placeholder or an escaped percent sign; any other ``%`` is malformed.
_PYFORMAT = re.compile(r"%\((?P<name>[^)]*)\)s|%%|%")


class RpcLimitError(ValueError):
    """A statement or value is too long to travel as one RPC character parameter."""


@attrs.frozen
class RpcParameter:
    """One bound value: its ``@name``, the declared T-SQL type, the value and its dblib type."""

    name: str
    sql_type: str
    value: object
    dbtype: int


@attrs.frozen
class RpcStatement:
    """``sp_executesql``'s ``@stmt`` and ``@params``, and the values bound after them."""

    text: str
    definition: str
    parameters: tuple[RpcParameter, ...]


def utf16_units(text: str) -> int:
    """The length of ``text`` as SQL Server counts an ``nvarchar``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _checked_length(what: str, text: str) -> str:
    if utf16_units(text) > MAX_NVARCHAR_UNITS:
        msg = f"{what} exceeds {MAX_NVARCHAR_UNITS} UTF-16 code units"
        raise RpcLimitError(msg)
    return text


def bindable(value: object) -> object:
    """Make a value bindable as an RPC character parameter.

    Lone surrogates (undecodable input) become U+FFFD and NUL a space: pymssql encodes the
    value as UTF-8 and hands FreeTDS a C string (its length taken by ``strlen``), so either
    would fail or cut the value short. Such a value could never equal stored text anyway.
    """
    if isinstance(value, str):
        value = value.replace("\x00", " ")
    return utf8_bindable(value)


def rpc_text(sql: str) -> tuple[str, tuple[str, ...]]:
    """Rewrite ``pyformat`` text to ``@name`` placeholders; return it and the names in order.

    Raises:
        ValueError: a ``%`` that is neither ``%%`` nor ``%(name)s``, or a name that is not a
            plain identifier (it would not be a valid T-SQL variable).
    """
    names: list[str] = []

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "%%":
            return "%"
        name = match.group("name")
        if name is None or not _NAME.fullmatch(name):
            msg = "malformed placeholder in the compiled statement"
            raise ValueError(msg)
        names.append(name)
        return "@" + name

    return _PYFORMAT.sub(replace, sql), tuple(dict.fromkeys(names))


def _parameter(name: str, value: object) -> RpcParameter:
    """The declared type follows the Python type alone, so it never varies with content."""
    at = "@" + name
    # bool first: it is an int subclass.
    if isinstance(value, bool):
        return RpcParameter(at, "bit", value, _mssql.SQLBITN)
    if isinstance(value, int):
        if not _BIGINT[0] <= value <= _BIGINT[1]:
            msg = f"{at} is outside the bigint range"
            raise RpcLimitError(msg)
        return RpcParameter(at, "bigint", value, _mssql.SQLINT8)
    if isinstance(value, float):
        return RpcParameter(at, "float", value, _mssql.SQLFLT8)
    # Dates travel as ISO text and the server converts them to the declared type.
    if isinstance(value, datetime):
        sql_type = "datetime2" if value.tzinfo is None else "datetimeoffset"
        return RpcParameter(at, sql_type, value.isoformat(sep=" "), _mssql.SQLVARCHAR)
    if isinstance(value, date):
        return RpcParameter(at, "date", value.isoformat(), _mssql.SQLVARCHAR)
    if value is None:
        return RpcParameter(at, "nvarchar(4000)", None, _mssql.SQLVARCHAR)
    if isinstance(value, str):
        return RpcParameter(at, "nvarchar(4000)", value, _mssql.SQLVARCHAR)
    msg = f"{at}: no RPC type for {type(value).__name__}"
    raise TypeError(msg)


def compose_rpc(sql: str, params: Mapping[str, object]) -> RpcStatement:
    """Return the ``sp_executesql`` call for the builder's ``sql`` and ``params``, whatever
    its lengths: what ``rpc_statement`` sends, for measuring it against the limits.

    Raises:
        RpcLimitError: an integer is outside ``bigint``.
        ValueError: a malformed placeholder, or a placeholder without a value.
        TypeError: a value of a type with no RPC mapping.
    """
    text, names = rpc_text(sql)
    missing = [name for name in names if name not in params]
    if missing:
        msg = f"no value for {', '.join(missing)}"
        raise ValueError(msg)
    # Exactly the placeholders the text uses are declared and bound, in text order.
    parameters = tuple(_parameter(name, params[name]) for name in names)
    definition = ", ".join(f"{p.name} {p.sql_type}" for p in parameters)
    return RpcStatement(text=text, definition=definition, parameters=parameters)


def rpc_statement(sql: str, params: Mapping[str, object]) -> RpcStatement:
    """Return the ``sp_executesql`` call for the builder's ``sql`` and ``params``.

    Raises:
        RpcLimitError: the statement, its parameter definition or a character value is over
            4,000 UTF-16 code units, or an integer is outside ``bigint``.
        ValueError: a malformed placeholder, or a placeholder without a value.
        TypeError: a value of a type with no RPC mapping.
    """
    statement = compose_rpc(sql, params)
    for p in statement.parameters:
        if isinstance(p.value, str):
            _checked_length(f"value {p.name}", p.value)
    _checked_length("the statement", statement.text)
    _checked_length("the parameter definition", statement.definition)
    return statement


def execute_rpc(connection: Any, statement: RpcStatement) -> Sequence[tuple[Any, ...]]:
    """Call ``sp_executesql`` on an ``_mssql.MSSQLConnection`` and return every row as a tuple.

    Raises:
        _mssql.MSSQLDatabaseException: the server refused the call or the statement.
        _mssql.MSSQLDriverException: the driver could not bind or send it.
    """
    proc = connection.init_procedure(PROCEDURE)
    proc.bind(statement.text, _mssql.SQLVARCHAR, "@stmt")
    if statement.parameters:
        proc.bind(statement.definition, _mssql.SQLVARCHAR, "@params")
        for p in statement.parameters:
            proc.bind(p.value, p.dbtype, p.name, null=p.value is None)
    proc.execute()
    return list(connection.get_iterator(_mssql.ROW_FORMAT_TUPLE))
