"""Identifier quoting for the few statements written by hand (DDL, catalog reads).

PyMySQL formats the whole command text with ``%`` (``query % escaped_args``) whenever
arguments are given, so a ``%`` inside an identifier must be doubled; SQLAlchemy's MySQL
preparer does exactly that under the ``pyformat`` paramstyle (and doubles backticks). Every
hand-written statement using these identifiers is therefore executed *with* an argument
dictionary (possibly empty), so the doubled ``%%`` is read back as one ``%``.
"""

from __future__ import annotations

from sqlalchemy.dialects import mysql

__all__ = ["DIALECT", "quote_identifier"]

DIALECT = mysql.dialect(paramstyle="pyformat")
_PREPARER = DIALECT.identifier_preparer


def quote_identifier(name: str) -> str:
    """Return ``name`` backtick-quoted, backticks and ``%`` doubled."""
    return _PREPARER.quote_identifier(name)
