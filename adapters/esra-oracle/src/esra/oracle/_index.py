"""DDL for the Oracle Text CONTEXT index a mapping needs (run once, by an administrator)."""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa

from esra.core.config import Mapping
from esra.oracle._identifiers import oracle_dialect

__all__ = ["searchable_columns", "text_index_statements"]

_dialect: Any = oracle_dialect()
# A nonquoted Oracle identifier (ASCII only: no character set can change its meaning).
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_$#]*")
_preparer = _dialect.identifier_preparer


def searchable_columns(mapping: Mapping) -> list[str]:
    """The columns searched: those marked searchable, else title and content fields."""
    marked = [f.column for f in mapping.fields if f.is_searchable]
    if marked:
        return marked
    specs = (mapping.field(name) for name in (mapping.title_field, *mapping.content_fields))
    return list(dict.fromkeys(spec.column for spec in specs if spec is not None))


def text_index_statements(mapping: Mapping, *, sync: str = "ON COMMIT") -> list[str]:
    """Return the PL/SQL and DDL creating ``mapping.text_index`` as a CONTEXT index.

    The index is on the first searchable column; with several searchable columns a
    ``MULTI_COLUMN_DATASTORE`` preference (named ``<index>_DS``) makes that one index cover
    all of them. Identifiers are quoted by the ``oracle`` dialect; ``sync`` is a fixed
    choice (``ON COMMIT`` or ``MANUAL``).

    Raises:
        ValueError: no ``text_index``, or another ``sync``; or several searchable columns
            and a ``text_index`` that is not a plain identifier (its preference's name
            stands unquoted in the ``PARAMETERS`` string).
        ProviderError: ``RELATION_NOT_FOUND`` when a name holds ``"`` or NUL, which no
            Oracle identifier can (``esra.oracle._identifiers``).
    """
    if not mapping.text_index:
        msg = "Mapping.text_index names the CONTEXT index to create"
        raise ValueError(msg)
    if sync not in {"ON COMMIT", "MANUAL"}:
        msg = "sync must be 'ON COMMIT' or 'MANUAL'"
        raise ValueError(msg)
    columns = searchable_columns(mapping)
    table = _preparer.format_table(sa.table(mapping.relation, schema=mapping.schema))
    index = _preparer.quote(mapping.text_index)
    if mapping.schema:
        index = f"{_preparer.quote_schema(mapping.schema)}.{index}"
    statements: list[str] = []
    parameters = f"SYNC ({sync})"
    if len(columns) > 1:
        if not _PLAIN_NAME.fullmatch(mapping.text_index):
            # The preference is named inside the PARAMETERS string, which Oracle Text reads
            # as keyword/value pairs with no quoting or escape: any other name would end the
            # literal (``'``) or add keywords of its own (a space) to the administrator's DDL.
            msg = "with several searchable columns, text_index must be a plain identifier"
            raise ValueError(msg)
        preference = f"{_dialect.denormalize_name(mapping.text_index)}_DS"
        column_list = ",".join(_preparer.quote(c) for c in columns).replace("'", "''")
        literal = preference.replace("'", "''")
        statements.append(
            "BEGIN "
            f"CTX_DDL.CREATE_PREFERENCE('{literal}', 'MULTI_COLUMN_DATASTORE'); "
            f"CTX_DDL.SET_ATTRIBUTE('{literal}', 'COLUMNS', '{column_list}'); "
            "END;"
        )
        parameters = f"DATASTORE {preference} {parameters}"
    statements.append(
        f"CREATE INDEX {index} ON {table} ({_preparer.quote(columns[0])}) "
        f"INDEXTYPE IS CTXSYS.CONTEXT PARAMETERS ('{parameters}')"
    )
    return statements
