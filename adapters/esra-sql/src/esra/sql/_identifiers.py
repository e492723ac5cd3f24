"""A configured schema, as a dialect must receive it: one identifier, always."""

from __future__ import annotations

from sqlalchemy.sql.compiler import IdentifierPreparer
from sqlalchemy.sql.elements import quoted_name

__all__ = ["schema_identifier"]


def schema_identifier(schema: str | None, preparer: IdentifierPreparer) -> str | None:
    """Return a configured ``schema`` for ``preparer``: one identifier, always.

    A name the preparer would quote anyway becomes a ``quoted_name`` with ``quote=True``, which
    every dialect emits as one delimited identifier. As a plain string, SQLAlchemy's ``mssql``
    quoter would read it as ``database.owner``: split it on ``.`` and emit a part holding
    internal brackets verbatim, so ``[a].x; SELECT ...--.[c].dbo`` would put ``x; SELECT ...--``
    into the statement. A name the preparer leaves bare (letters, digits, ``_``, ``$``; no
    reserved word) stays a plain string, so ordinary schemas render byte for byte as before,
    on every dialect — and a dotted name is one schema, never database and owner.
    """
    if not schema or preparer.quote(schema) == schema:
        return schema
    return quoted_name(schema, quote=True)
