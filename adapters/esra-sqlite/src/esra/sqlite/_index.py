"""Create the external-content FTS5 index a mapping is searched through.

The index is an FTS5 table named by ``Mapping.text_index`` whose content is the mapping's
relation (``content=<relation>``, joined back on ``rowid``), kept in step by three triggers
and filled once with ``rebuild``. This is administration — run it over a writable connection
of your own; the provider itself only ever reads.

Identifiers come from configuration and are always quoted by SQLAlchemy's SQLite identifier
quoter; option values are SQL string literals with ``'`` doubled.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from sqlalchemy.dialects import sqlite as sqlite_dialect

from esra.core.config import Mapping

__all__ = ["DEFAULT_TOKENIZE", "create_fts5_index", "fts5_index_columns", "fts5_index_statements"]

# Porter stemming over unicode61: "layers" meets "layer" and "flows" meets "flow", as they do
# in PostgreSQL's english configuration. Measured on five test collections (bench/
# retrieval_quality.py) the stemmed index ranks better on every one of them.
DEFAULT_TOKENIZE = "porter unicode61 remove_diacritics 2"

_PREPARER = sqlite_dialect.dialect().identifier_preparer


def _ident(name: str) -> str:
    return _PREPARER.quote_identifier(name)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def fts5_index_columns(mapping: Mapping) -> tuple[str, ...]:
    """Return the physical columns to index: searchable fields, else title and content."""
    marked = [f.column for f in mapping.fields if f.is_searchable]
    if not marked:
        named = (mapping.field(n) for n in (mapping.title_field, *mapping.content_fields))
        marked = [f.column for f in named if f is not None]
    if not marked:
        msg = "the mapping has no column to index"
        raise ValueError(msg)
    return tuple(dict.fromkeys(marked))


def fts5_index_statements(
    mapping: Mapping,
    *,
    columns: Sequence[str] | None = None,
    tokenize: str = DEFAULT_TOKENIZE,
) -> tuple[str, ...]:
    """Return the DDL creating ``mapping.text_index``, its triggers and the initial rebuild.

    Args:
        mapping: names the relation (content table), its schema and the FTS table.
        columns: physical columns to index; ``fts5_index_columns(mapping)`` by default.
        tokenize: the FTS5 tokenizer specification.

    Raises:
        ValueError: if the mapping has no ``text_index`` or nothing to index.
    """
    if not mapping.text_index:
        msg = "the mapping names no text index"
        raise ValueError(msg)
    cols = tuple(columns) if columns is not None else fts5_index_columns(mapping)
    prefix = f"{_ident(mapping.schema)}." if mapping.schema else ""
    index = _ident(mapping.text_index)
    relation = _ident(mapping.relation)
    col_list = ", ".join(_ident(c) for c in cols)
    new_values = ", ".join(f"new.{_ident(c)}" for c in cols)
    old_values = ", ".join(f"old.{_ident(c)}" for c in cols)
    # Every name here is a configured identifier passed through the dialect's quoter; no
    # value is ever interpolated (S608 cannot see that).
    delete_old = (
        f"INSERT INTO {index}({index}, rowid, {col_list}) "  # noqa: S608
        f"VALUES ('delete', old.rowid, {old_values});"
    )
    insert_new = f"INSERT INTO {index}(rowid, {col_list}) VALUES (new.rowid, {new_values});"  # noqa: S608

    def trigger(suffix: str) -> str:
        return prefix + _ident(f"{mapping.text_index}_{suffix}")

    return (
        f"CREATE VIRTUAL TABLE {prefix}{index} USING fts5({col_list}, "
        f"content={_literal(mapping.relation)}, content_rowid='rowid', "
        f"tokenize={_literal(tokenize)})",
        f"CREATE TRIGGER {trigger('ai')} AFTER INSERT ON {relation} BEGIN {insert_new} END",
        f"CREATE TRIGGER {trigger('ad')} AFTER DELETE ON {relation} BEGIN {delete_old} END",
        f"CREATE TRIGGER {trigger('au')} AFTER UPDATE ON {relation} "
        f"BEGIN {delete_old} {insert_new} END",
        f"INSERT INTO {prefix}{index}({index}) VALUES ('rebuild')",  # noqa: S608
    )


def create_fts5_index(
    connection: sqlite3.Connection,
    mapping: Mapping,
    *,
    columns: Sequence[str] | None = None,
    tokenize: str = DEFAULT_TOKENIZE,
) -> None:
    """Create ``mapping.text_index`` over the mapping's relation, in one transaction.

    Rows already in the relation are indexed by the rebuild; later inserts, updates and
    deletes are mirrored by the triggers.
    """
    statements = fts5_index_statements(mapping, columns=columns, tokenize=tokenize)
    in_transaction = connection.in_transaction
    if not in_transaction:
        connection.execute("BEGIN")
    try:
        for statement in statements:
            connection.execute(statement)
    except BaseException:
        if not in_transaction:
            connection.rollback()
        raise
    if not in_transaction:
        connection.commit()
