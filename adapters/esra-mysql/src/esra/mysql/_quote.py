"""The builder's SQL dialect, and identifier quoting for the few statements written by hand.

esra-sql's ``StatementBuilder`` compiles with a named paramstyle; under ``pyformat`` the
MySQL compiler writes ``%(name)s`` where a value goes and doubles every ``%`` inside an
identifier, so the text can be read back unambiguously (``esra.mysql._placeholders``).

Hand-written statements (DDL, catalog reads) carry no value, are sent as they are, and are
never %-formatted by any driver, so their identifiers are quoted by the same dialect under a
paramstyle that leaves ``%`` alone: backticks doubled, nothing else changed.
"""

from __future__ import annotations

from sqlalchemy.dialects import mysql

__all__ = ["DIALECT", "quote_identifier"]

DIALECT = mysql.dialect(paramstyle="pyformat")
_PREPARER = mysql.dialect(paramstyle="qmark").identifier_preparer


def quote_identifier(name: str) -> str:
    """Return ``name`` backtick-quoted, backticks doubled."""
    return _PREPARER.quote_identifier(name)
